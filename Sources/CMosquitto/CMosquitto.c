#include "CMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>

// The functions birdctl uses, resolved from libmosquitto.so.1 by cmosq_load.
static struct {
    __typeof__(mosquitto_lib_init) *lib_init;
    __typeof__(mosquitto_new) *new_;
    __typeof__(mosquitto_destroy) *destroy;
    __typeof__(mosquitto_user_data_set) *user_data_set;
    __typeof__(mosquitto_threaded_set) *threaded_set;
    __typeof__(mosquitto_max_inflight_messages_set) *max_inflight_messages_set;
    __typeof__(mosquitto_reconnect_delay_set) *reconnect_delay_set;
    __typeof__(mosquitto_username_pw_set) *username_pw_set;
    __typeof__(mosquitto_tls_set) *tls_set;
    __typeof__(mosquitto_will_set) *will_set;
    __typeof__(mosquitto_connect_callback_set) *connect_callback_set;
    __typeof__(mosquitto_disconnect_callback_set) *disconnect_callback_set;
    __typeof__(mosquitto_publish_callback_set) *publish_callback_set;
    __typeof__(mosquitto_log_callback_set) *log_callback_set;
    __typeof__(mosquitto_connect) *connect;
    __typeof__(mosquitto_reconnect) *reconnect;
    __typeof__(mosquitto_disconnect) *disconnect;
    __typeof__(mosquitto_loop_forever) *loop_forever;
    __typeof__(mosquitto_publish) *publish;
    __typeof__(mosquitto_subscribe) *subscribe;
    __typeof__(mosquitto_message_callback_set) *message_callback_set;
    __typeof__(mosquitto_strerror) *strerror_;
    __typeof__(mosquitto_connack_string) *connack_string;
    void (*openssl_thread_stop)(void); // libcrypto's, through libmosquitto; NULL without it
} api;

static const char *load_error = "libmosquitto was never loaded";
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#define RESOLVE(field, name) \
    if (!(api.field = (__typeof__(api.field))dlsym(library, name))) { load_error = "libmosquitto.so.1 lacks " name; return; }

static void load(void) {
    void *library = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        load_error = dlerror();
        return;
    }
    RESOLVE(lib_init, "mosquitto_lib_init")
    RESOLVE(new_, "mosquitto_new")
    RESOLVE(destroy, "mosquitto_destroy")
    RESOLVE(user_data_set, "mosquitto_user_data_set")
    RESOLVE(threaded_set, "mosquitto_threaded_set")
    RESOLVE(max_inflight_messages_set, "mosquitto_max_inflight_messages_set")
    RESOLVE(reconnect_delay_set, "mosquitto_reconnect_delay_set")
    RESOLVE(username_pw_set, "mosquitto_username_pw_set")
    RESOLVE(tls_set, "mosquitto_tls_set")
    RESOLVE(will_set, "mosquitto_will_set")
    RESOLVE(connect_callback_set, "mosquitto_connect_callback_set")
    RESOLVE(disconnect_callback_set, "mosquitto_disconnect_callback_set")
    RESOLVE(publish_callback_set, "mosquitto_publish_callback_set")
    RESOLVE(log_callback_set, "mosquitto_log_callback_set")
    RESOLVE(connect, "mosquitto_connect")
    RESOLVE(reconnect, "mosquitto_reconnect")
    RESOLVE(disconnect, "mosquitto_disconnect")
    RESOLVE(loop_forever, "mosquitto_loop_forever")
    RESOLVE(publish, "mosquitto_publish")
    RESOLVE(subscribe, "mosquitto_subscribe")
    RESOLVE(message_callback_set, "mosquitto_message_callback_set")
    RESOLVE(strerror_, "mosquitto_strerror")
    RESOLVE(connack_string, "mosquitto_connack_string")
    api.openssl_thread_stop = (void (*)(void))dlsym(library, "OPENSSL_thread_stop");
    load_error = NULL;
}

const char *cmosq_load(void) {
    pthread_once(&load_once, load);
    return load_error;
}

int cmosq_lib_init(void) { return api.lib_init(); }
struct mosquitto *cmosq_new(const char *id, bool clean_session, void *obj) { return api.new_(id, clean_session, obj); }
void cmosq_destroy(struct mosquitto *mosq) { api.destroy(mosq); }
void cmosq_user_data_set(struct mosquitto *mosq, void *obj) { api.user_data_set(mosq, obj); }
int cmosq_threaded_set(struct mosquitto *mosq, bool threaded) { return api.threaded_set(mosq, threaded); }
int cmosq_max_inflight_messages_set(struct mosquitto *mosq, unsigned int max) {
    return api.max_inflight_messages_set(mosq, max);
}
int cmosq_reconnect_delay_set(struct mosquitto *mosq, unsigned int delay, unsigned int delay_max, bool exponential) {
    return api.reconnect_delay_set(mosq, delay, delay_max, exponential);
}
int cmosq_username_pw_set(struct mosquitto *mosq, const char *username, const char *password) {
    return api.username_pw_set(mosq, username, password);
}
int cmosq_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath, const char *certfile,
                  const char *keyfile) {
    return api.tls_set(mosq, cafile, capath, certfile, keyfile, NULL);
}
int cmosq_will_set(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload, int qos,
                   bool retain) {
    return api.will_set(mosq, topic, payloadlen, payload, qos, retain);
}
void cmosq_connect_callback_set(struct mosquitto *mosq, void (*on_connect)(struct mosquitto *, void *, int)) {
    api.connect_callback_set(mosq, on_connect);
}
void cmosq_disconnect_callback_set(struct mosquitto *mosq, void (*on_disconnect)(struct mosquitto *, void *, int)) {
    api.disconnect_callback_set(mosq, on_disconnect);
}
void cmosq_publish_callback_set(struct mosquitto *mosq, void (*on_publish)(struct mosquitto *, void *, int)) {
    api.publish_callback_set(mosq, on_publish);
}
void cmosq_log_callback_set(struct mosquitto *mosq, void (*on_log)(struct mosquitto *, void *, int, const char *)) {
    api.log_callback_set(mosq, on_log);
}
int cmosq_connect(struct mosquitto *mosq, const char *host, int port, int keepalive) {
    return api.connect(mosq, host, port, keepalive);
}
int cmosq_reconnect(struct mosquitto *mosq) { return api.reconnect(mosq); }
int cmosq_disconnect(struct mosquitto *mosq) { return api.disconnect(mosq); }
int cmosq_loop_forever(struct mosquitto *mosq, int timeout, int max_packets) {
    return api.loop_forever(mosq, timeout, max_packets);
}
int cmosq_publish(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen, const void *payload, int qos,
                  bool retain) {
    return api.publish(mosq, mid, topic, payloadlen, payload, qos, retain);
}
int cmosq_subscribe(struct mosquitto *mosq, int *mid, const char *sub, int qos) {
    return api.subscribe(mosq, mid, sub, qos);
}
void cmosq_message_callback_set(struct mosquitto *mosq,
                                void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *)) {
    api.message_callback_set(mosq, on_message);
}
const char *cmosq_strerror(int mosq_errno) { return api.strerror_(mosq_errno); }
const char *cmosq_connack_string(int connack_code) { return api.connack_string(connack_code); }

void cmosq_openssl_thread_stop(void) {
    if (api.openssl_thread_stop) api.openssl_thread_stop();
}
