import Glibc
import KVCtl

exit(KVCtl.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: KVCtl.processEnvironment()))
