// Connections to kvd (`Connection`, `ClientError`, ...) live in KVConnection, which does not link
// Foundation, so that kvctl can use them without paying Foundation's start-up and size; an app
// names them with `import KVClient` alone.
@_exported import KVConnection

// The value type of KVClient's API (`value(forKey:)`, `observe`, `write`): an app names it with
// `import KVClient` alone.
@_exported import enum KVValues.Value
// Who made a change (history, blame, watch events).
@_exported import struct KVValues.Writer
