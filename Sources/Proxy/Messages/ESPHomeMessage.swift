import SwiftProtobuf

/// A message of ESPHome's native API: a generated protobuf message with its
/// type number on the wire (ESPHomeMessageTypes.swift, generated too).
public protocol ESPHomeMessage: SwiftProtobuf.Message {
    static var messageType: UInt32 { get }
}
