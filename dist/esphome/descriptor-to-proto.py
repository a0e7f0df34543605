"""Writes .proto text from the serialized descriptors inside aioesphomeapi's
api_pb2.py / api_options_pb2.py (the wheel carries no .proto files).

usage: python descriptor_to_proto.py OUT_DIR   (run where `espapi/` holds the two _pb2 files)
Writes OUT_DIR/api.proto and OUT_DIR/api_options.proto, protoc-compatible.
Covers what these two files use: top-level messages and enums, proto2/proto3
labels, defaults, [deprecated]/[packed], custom message/method options, one
service, extensions of google.protobuf.*Options."""
import sys
from google.protobuf import descriptor_pb2 as d

F = d.FieldDescriptorProto
SCALAR = {F.TYPE_DOUBLE: 'double', F.TYPE_FLOAT: 'float', F.TYPE_INT64: 'int64', F.TYPE_UINT64: 'uint64',
          F.TYPE_INT32: 'int32', F.TYPE_FIXED64: 'fixed64', F.TYPE_FIXED32: 'fixed32', F.TYPE_BOOL: 'bool',
          F.TYPE_STRING: 'string', F.TYPE_BYTES: 'bytes', F.TYPE_UINT32: 'uint32', F.TYPE_SFIXED32: 'sfixed32',
          F.TYPE_SFIXED64: 'sfixed64', F.TYPE_SINT32: 'sint32', F.TYPE_SINT64: 'sint64'}


def type_of(f):
    return SCALAR.get(f.type) or f.type_name.lstrip('.')


def custom_options(opts):
    """[(name, value)] of extension options set on an options message."""
    out = []
    for fd, value in opts.ListFields():
        if not fd.is_extension:
            continue
        if fd.enum_type is not None:
            value = fd.enum_type.values_by_number[value].name
        elif isinstance(value, bool):
            value = 'true' if value else 'false'
        elif isinstance(value, str):
            value = '"' + value.replace('\\', '\\\\').replace('"', '\\"') + '"'
        out.append((fd.name, value))
    return out


def field_line(f, proto3):
    label = ''
    if f.label == F.LABEL_REPEATED:
        label = 'repeated '
    elif not proto3:
        label = 'required ' if f.label == F.LABEL_REQUIRED else 'optional '
    opts = []
    if f.options.HasField('deprecated'):
        opts.append(f'deprecated = {str(f.options.deprecated).lower()}')
    if f.options.HasField('packed'):
        opts.append(f'packed = {str(f.options.packed).lower()}')
    if f.HasField('default_value'):
        v = f.default_value
        opts.append(f'default = "{v}"' if f.type == F.TYPE_STRING else f'default = {v}')
    tail = f' [{", ".join(opts)}]' if opts else ''
    return f'{label}{type_of(f)} {f.name} = {f.number}{tail};'


def render(fdp):
    proto3 = fdp.syntax == 'proto3'
    out = [f'syntax = "{"proto3" if proto3 else "proto2"}";', '']
    for dep in fdp.dependency:
        out.append(f'import "{dep}";')
    out.append('')
    for s in fdp.service:
        out.append(f'service {s.name} {{')
        for m in s.method:
            opts = custom_options(m.options)
            body = ' {\n' + ''.join(f'    option ({n}) = {v};\n' for n, v in opts) + '  }' if opts else ' {}'
            out.append(f'  rpc {m.name} ({m.input_type.lstrip(".")}) returns ({m.output_type.lstrip(".")}){body}')
        out.append('}')
        out.append('')
    for e in fdp.enum_type:
        out.append(f'enum {e.name} {{')
        out += [f'  {v.name} = {v.number};' for v in e.value]
        out.append('}')
    for m in fdp.message_type:
        out.append(f'message {m.name} {{')
        out += [f'  option ({n}) = {v};' for n, v in custom_options(m.options)]
        out += ['  ' + field_line(f, proto3) for f in m.field]
        out.append('}')
        out.append('')
    by_extendee = {}
    for x in fdp.extension:
        by_extendee.setdefault(x.extendee.lstrip('.'), []).append(x)
    for extendee, xs in by_extendee.items():
        out.append(f'extend {extendee} {{')
        out += ['  ' + field_line(x, proto3) for x in xs]
        out.append('}')
    return '\n'.join(out) + '\n'


def main():
    from espapi import api_options_pb2, api_pb2  # registers api_options' extensions first
    for module, name in ((api_options_pb2, 'api_options.proto'), (api_pb2, 'api.proto')):
        fdp = d.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fdp)
        with open(f'{sys.argv[1]}/{name}', 'w') as out:
            out.write(render(fdp))


if __name__ == '__main__':
    main()
