import Glibc
import HabitsKit
import KVSystem

let environment = HabitsCLI.processEnvironment()
exit(
    HabitsCLI.main(
        arguments: Array(CommandLine.arguments.dropFirst()), environment: environment, console: StandardConsole(),
        colour: HabitsCLI.wantsColour(environment: environment, isTerminal: LinuxSystem().isTerminal(1))))
