// SwiftPM links an executable's entry point as <Module>_main, which a
// library-parsed fuzz target does not have: these hand libFuzzer's driver
// the target's LLVMFuzzerTestOneInput instead.
#include "FuzzMain.h"

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAIN(target) \
    int target##_main(int argc, char **argv) { return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput); }

FUZZ_MAIN(FuzzBirdValues)
FUZZ_MAIN(FuzzDBusMessages)
FUZZ_MAIN(FuzzServeLines)
FUZZ_MAIN(FuzzPeerText)
FUZZ_MAIN(FuzzBlueZTree)
FUZZ_MAIN(FuzzExportedMethods)
FUZZ_MAIN(FuzzIntrospection)
FUZZ_MAIN(FuzzBlueZErrors)
FUZZ_MAIN(FuzzDatagramReader)
FUZZ_MAIN(FuzzProxyFrames)
FUZZ_MAIN(FuzzNoiseHandshake)
FUZZ_MAIN(FuzzProxySession)
FUZZ_MAIN(FuzzKernelAdvertisements)
