#ifndef CMOSQUITTO_H
#define CMOSQUITTO_H

// libmosquitto, the reference MQTT client library, loaded with dlopen the
// first time a gateway starts: every other command (read, scan, ...) then
// never maps libmosquitto and OpenSSL, which would add to every command's
// peak RSS (see docs/performance.md, 'What a read maps').
// Each cmosq_ function calls the libmosquitto function of the same name.
#include <mosquitto.h>
#include <stdbool.h>

/// Loads libmosquitto.so.1 and its functions, once. NULL on success, else
/// why not (dlerror's text), the same every call.
const char *_Nullable cmosq_load(void);

int cmosq_lib_init(void);
struct mosquitto *_Nullable cmosq_new(const char *_Nullable id, bool clean_session, void *_Nullable obj);
void cmosq_destroy(struct mosquitto *_Nonnull mosq);
void cmosq_user_data_set(struct mosquitto *_Nonnull mosq, void *_Nullable obj);
int cmosq_threaded_set(struct mosquitto *_Nonnull mosq, bool threaded);
int cmosq_max_inflight_messages_set(struct mosquitto *_Nonnull mosq, unsigned int max_inflight_messages);
int cmosq_reconnect_delay_set(struct mosquitto *_Nonnull mosq, unsigned int delay, unsigned int delay_max, bool exponential);
int cmosq_username_pw_set(struct mosquitto *_Nonnull mosq, const char *_Nullable username, const char *_Nullable password);
int cmosq_tls_set(struct mosquitto *_Nonnull mosq, const char *_Nullable cafile, const char *_Nullable capath,
                  const char *_Nullable certfile, const char *_Nullable keyfile);
int cmosq_will_set(struct mosquitto *_Nonnull mosq, const char *_Nonnull topic, int payloadlen,
                   const void *_Nullable payload, int qos, bool retain);
void cmosq_connect_callback_set(struct mosquitto *_Nonnull mosq,
                                void (*_Nullable on_connect)(struct mosquitto *_Nonnull, void *_Nullable, int));
void cmosq_disconnect_callback_set(struct mosquitto *_Nonnull mosq,
                                   void (*_Nullable on_disconnect)(struct mosquitto *_Nonnull, void *_Nullable, int));
void cmosq_publish_callback_set(struct mosquitto *_Nonnull mosq,
                                void (*_Nullable on_publish)(struct mosquitto *_Nonnull, void *_Nullable, int));
void cmosq_log_callback_set(struct mosquitto *_Nonnull mosq,
                            void (*_Nullable on_log)(struct mosquitto *_Nonnull, void *_Nullable, int,
                                                     const char *_Nullable));
int cmosq_connect(struct mosquitto *_Nonnull mosq, const char *_Nonnull host, int port, int keepalive);
int cmosq_reconnect(struct mosquitto *_Nonnull mosq);
int cmosq_disconnect(struct mosquitto *_Nonnull mosq);
int cmosq_loop_forever(struct mosquitto *_Nonnull mosq, int timeout, int max_packets);
int cmosq_publish(struct mosquitto *_Nonnull mosq, int *_Nullable mid, const char *_Nonnull topic, int payloadlen,
                  const void *_Nullable payload, int qos, bool retain);
int cmosq_subscribe(struct mosquitto *_Nonnull mosq, int *_Nullable mid, const char *_Nonnull sub, int qos);
void cmosq_message_callback_set(struct mosquitto *_Nonnull mosq,
                                void (*_Nullable on_message)(struct mosquitto *_Nonnull, void *_Nullable,
                                                             const struct mosquitto_message *_Nonnull));
const char *_Nonnull cmosq_strerror(int mosq_errno);
const char *_Nonnull cmosq_connack_string(int connack_code);

/// Frees the calling thread's OpenSSL state now (OPENSSL_thread_stop, found
/// in the libcrypto libmosquitto loaded), instead of in a destructor as the
/// thread ends; nothing if libmosquitto was built without OpenSSL.
void cmosq_openssl_thread_stop(void);

#endif
