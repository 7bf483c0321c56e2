// KVStorage
