import Glibc
import KVDaemon

exit(Daemon.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: Daemon.currentEnvironment()))
