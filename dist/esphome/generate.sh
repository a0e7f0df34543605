#!/usr/bin/env bash
# Generates the proxy's message code (Sources/Proxy/Messages/) from ESPHome's
# api.proto as aioesphomeapi 23.0.0 ships it (Home Assistant 2024.3's pin).
# The wheel carries the compiled descriptors, not the .proto: it is written
# back from them (descriptor-to-proto.py), cut down to a proxy's messages
# (trim-api-proto.py, which also writes the table of message types), and
# compiled by Debian's protoc with swift-protobuf's plugin, built from the
# package mirror. Run by hand when the API changes; the output is committed.
set -euo pipefail
project=$(cd "$(dirname "$0")/../.." && pwd)
work=$project/.build/esphome-gen
mkdir -p "$work/espapi" "$work/out"
[[ -x $work/venv/bin/python ]] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check protobuf==4.25.1
"$work/venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 -d "$work/wheels" aioesphomeapi==23.0.0
unzip -j -o -q "$work"/wheels/aioesphomeapi-23.0.0-*.whl 'aioesphomeapi/api_pb2.py' 'aioesphomeapi/api_options_pb2.py' -d "$work/espapi"
touch "$work/espapi/__init__.py"
(cd "$work" && "$work/venv/bin/python" "$project/dist/esphome/descriptor-to-proto.py" out)
messages=$project/Sources/Proxy/Messages
python3 "$project/dist/esphome/trim-api-proto.py" "$work/out/api.proto" "$messages/api.proto" "$messages/ESPHomeMessageTypes.swift"
if [[ ! -x $work/swift-protobuf/.build/release/protoc-gen-swift ]]; then
    rm -rf "$work/swift-protobuf"
    git clone -q --branch 1.39.0 https://github.com/apple/swift-protobuf "$work/swift-protobuf"
    (cd "$work/swift-protobuf" && swift build -c release --product protoc-gen-swift)
fi
protoc -I "$messages" --plugin=protoc-gen-swift="$work/swift-protobuf/.build/release/protoc-gen-swift" \
    --swift_opt=Visibility=Public --swift_out="$messages" "$messages/api.proto"
echo "generate: $(wc -l < "$messages/api.pb.swift") lines in $messages/api.pb.swift"
