/// Every org.bluez name birdctl uses. Nothing above this layer spells them.
enum BlueZNames {
    static let busName = "org.bluez"
    static let root: String = "/org/bluez"
    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let gattService = "org.bluez.GattService1"
    static let gattCharacteristic = "org.bluez.GattCharacteristic1"
    static let gattDescriptor = "org.bluez.GattDescriptor1"
    static let gattManager = "org.bluez.GattManager1"
    static let advertisingManager = "org.bluez.LEAdvertisingManager1"
    static let advertisement = "org.bluez.LEAdvertisement1"
    static let agentManager = "org.bluez.AgentManager1"
    static let agent = "org.bluez.Agent1"
    static let errorPrefix = "org.bluez.Error."

    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
    static let busDriver = "org.freedesktop.DBus"
}
