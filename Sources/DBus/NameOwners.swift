/// The unique names that own the well-known names match rules give as
/// sender (`org.bluez` → `:1.7`). A handful at most, searched in order:
/// routing a signal looks one up per notification, and hashing the name for
/// a dictionary cost more than the rest of the match.
struct NameOwners {
    private var entries: [(name: String, owner: CString)] = []

    /// The owner; nil while not known yet. An empty owner: nobody has the name.
    subscript(name: String) -> CString? {
        get {
            for entry in entries where entry.name == name { return entry.owner }
            return nil
        }
        set {
            if let index = entries.firstIndex(where: { $0.name == name }) {
                if let newValue { entries[index].owner = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                entries.append((name, newValue))
            }
        }
    }
}
