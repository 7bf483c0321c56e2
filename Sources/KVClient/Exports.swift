// The value type of KVClient's API (`value(forKey:)`, `observe`, `write`): an app names it with
// `import KVClient` alone.
@_exported import enum KVValues.Value
