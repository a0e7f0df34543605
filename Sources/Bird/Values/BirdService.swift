/// The Bird Service: the contract with the peripheral (UUIDs in BlueZ's lower case).
public enum BirdService {
    public static let uuid = "b7ac06dc-09ff-40ed-b03a-55d09b08eb4a"
}

/// One characteristic of the Bird Service.
public enum BirdField: String, CaseIterable, Hashable, Sendable, Comparable {
    case name, color, alpha

    public var uuid: String {
        switch self {
        case .color: "b7ac06dc-09ff-40ed-b03a-55d09b080001"
        case .name: "b7ac06dc-09ff-40ed-b03a-55d09b080002"
        case .alpha: "b7ac06dc-09ff-40ed-b03a-55d09b080003"
        }
    }

    /// The field a characteristic UUID belongs to, compared case-insensitively.
    public init?(uuid: String) {
        let lower = uuid.lowercased()
        guard let field = BirdField.allCases.first(where: { $0.uuid == lower }) else { return nil }
        self = field
    }

    /// Order of output: name, color, alpha.
    public static func < (a: BirdField, b: BirdField) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}
