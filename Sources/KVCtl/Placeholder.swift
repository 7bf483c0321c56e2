// KVCtl
