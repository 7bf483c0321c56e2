// KVClient
