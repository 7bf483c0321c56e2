import Dispatch
import KVSystem
import Synchronization
import Testing

/// The one reconnect loop: backoff, stopping, and what an outage reports.
@Suite struct ReconnectingStreamTests {
    /// Runs `outcomes` as the attempts (calling ``ReconnectingStream/working()`` for those
    /// marked `worked`), then finishes; returns what `onRetry` heard and the waits.
    private func run(_ attempts: [(worked: Bool, outcome: ReconnectingStream.Outcome)]) -> (
        heard: [ReconnectingStream.Interruption], waits: [Duration]
    ) {
        let waits = Mutex<[Duration]>([])
        let stream = ReconnectingStream(
            backoff: .init(initial: .milliseconds(10), maximum: .milliseconds(40)),
            wait: { duration in waits.withLock { $0.append(duration) } })
        var remaining = attempts[...]
        var heard: [ReconnectingStream.Interruption] = []
        stream.run(
            { () -> ReconnectingStream.Outcome in
                guard let attempt = remaining.popFirst() else { return .finished }
                if attempt.worked { stream.working() }
                return attempt.outcome
            }, onRetry: { interruption, _ in heard.append(interruption) })
        return (heard, waits.withLock { $0 })
    }

    @Test func theBackoffDoublesUpToItsMaximumAndStartsAgainOnceTheStreamWorks() {
        let failed = (worked: false, outcome: ReconnectingStream.Outcome.failed("refused"))
        let (_, waits) = run([failed, failed, failed, failed, (true, .failed("closed")), failed])
        #expect(waits == [10, 20, 40, 40, 10, 20].map { .milliseconds($0) })
    }

    @Test func anOutageIsReportedOnceWhenItBeginsThenOnlyWhenItsReasonChanges() {
        let (heard, _) = run([
            (false, .failed("refused")), (false, .failed("refused")), (false, .failed("no such file")),
            (true, .failed("it closed the connection")), (false, .failed("refused")),
        ])
        #expect(
            heard == [
                .outage("refused"), .stillOut("refused", changed: false), .stillOut("no such file", changed: true),
                .lost("it closed the connection"), .outage("refused"),
            ])
    }

    /// A stream the other side closed (a restart) begins no outage, and does not end one.
    @Test func anEndedStreamIsLostNotAnOutage() {
        let (heard, waits) = run([
            (false, .ended("closed")), (false, .failed("refused")), (false, .ended("closed")),
            (false, .failed("refused")), (false, .again),
        ])
        #expect(
            heard == [.lost("closed"), .outage("refused"), .lost("closed"), .stillOut("refused", changed: false)])
        #expect(waits.count == 4, "again must not wait")
    }

    @Test func anAttemptThatThrowsEndsTheRunWithItsError() {
        struct Refused: Error, Equatable {}
        let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(1), maximum: .milliseconds(1)))
        var caught: Refused?
        do throws(Refused) {
            try stream.run(
                { () throws(Refused) -> ReconnectingStream.Outcome in throw Refused() }, onRetry: { _, _ in })
        } catch {
            caught = error
        }
        #expect(caught == Refused())
    }

    /// Stopping ends the wait in progress at once (a backoff of an hour), interrupts the attempt
    /// in progress, and no attempt starts after it.
    @Test func stopEndsTheWaitAndInterruptsTheAttempt() {
        let stream = ReconnectingStream(backoff: .init(initial: .seconds(3600), maximum: .seconds(3600)))
        let waiting = DispatchSemaphore(value: 0)
        let returned = DispatchSemaphore(value: 0)
        let attempts = Mutex(0)
        DispatchQueue.global().async {
            stream.run(
                { () -> ReconnectingStream.Outcome in
                    attempts.withLock { $0 += 1 }
                    return .failed("refused")
                }, onRetry: { _, _ in waiting.signal() })
            returned.signal()
        }
        waiting.wait()
        stream.stop()
        #expect(returned.wait(timeout: .now() + .seconds(30)) == .success, "stop did not end the wait")
        #expect(attempts.withLock { $0 } == 1)
        let interrupted = Mutex(false)
        let kept = stream.interrupting(with: { interrupted.withLock { $0 = true } })
        #expect(!kept, "a stopped stream kept an attempt")
    }

    @Test func stopCallsTheInterruptOfTheAttemptInProgress() {
        let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(1), maximum: .milliseconds(1)))
        let interrupted = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let returned = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            stream.run(
                { () -> ReconnectingStream.Outcome in
                    guard stream.interrupting(with: { interrupted.signal() }) else { return .finished }
                    started.signal()
                    interrupted.wait()  // a blocked read, until interrupted
                    return .failed("interrupted")
                }, onRetry: { _, _ in Issue.record("a stopped stream reported its interrupted attempt") })
            returned.signal()
        }
        started.wait()
        stream.stop()
        #expect(returned.wait(timeout: .now() + .seconds(30)) == .success, "stop did not interrupt the attempt")
    }
}
