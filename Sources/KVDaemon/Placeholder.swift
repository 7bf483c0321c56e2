// KVDaemon
