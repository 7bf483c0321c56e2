// KVProtocol
