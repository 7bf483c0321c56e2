import Glibc
import HabitsKit

let environment = HabitsCLI.processEnvironment()
exit(
    HabitsCLI.main(
        arguments: Array(CommandLine.arguments.dropFirst()), environment: environment, console: StandardConsole(),
        colour: HabitsCLI.wantsColour(environment: environment, isTerminal: isatty(1) != 0)))
