import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVValues

/// The system instance's drop-in files in the loop (``DropInLayer``): read at start, again on
/// SIGHUP (`systemctl reload`), on `io.kvd.System.Reload` and when the folders change
/// (``DropInWatcher``); each reload that changes what users get is one marker commit, and its
/// delivery sends every mirror the difference as one batch. Loop thread only.
extension Server {
    /// Reads the drop-in files in `directory` before the loop serves anyone (with the last good
    /// content `kept` holds, and keeping it there), commits the marker when they differ from the
    /// last start's (blocks on it), and watches the folders. `adminGroup` may write the files.
    /// `dconfDirectory`: dconf's folder, read too (nil: not).
    func startDropIns(
        directory: String, adminGroup: String, fileSystem: any FileSystem, kept: KeptDropInsFile? = nil,
        dconfDirectory: String? = nil
    ) {
        var reader = DropInReader(directory: directory, fileSystem: fileSystem, system: system, adminGroup: adminGroup)
        reader.dconfDirectory = dconfDirectory
        if let marker = handler.dropIns.start(reader, store: store, log: log, kept: kept) {
            do { _ = try store.commit(.dropInState, marker) } catch {
                log.error("the drop-in files: cannot record their generation: \(error)")
            }
        }
        lifecycle.startDropIns(in: directory)
        watchDropIns(directory, quiet: false)
    }

    /// Watches the folders in `directory`; while it cannot (the folder is missing: not mounted
    /// yet, say), ``lookForDropInFolder()`` tries again.
    private func watchDropIns(_ directory: String, quiet: Bool) {
        do {
            let watcher = try DropInWatcher(
                directory: directory, system: system,
                moreFolders: { [layer = handler.dropIns] in layer.dconfFolders() })
            try poller.watch(watcher.fd, readable: true, writable: false, adding: true)
            lifecycle.dropInsWatched(by: watcher)
            if !watcher.watchesDirectory, !quiet {
                log.info("no drop-in folder \(directory): looked for every \(Lifecycle.dropInLookInterval)")
            }
        } catch {
            if quiet { return }
            if error.errno == .noSuchFileOrDirectory {
                log.info("no drop-in folder \(directory): looked for every \(Lifecycle.dropInLookInterval)")
            } else {
                log.warning(
                    "the drop-in folders in \(directory) are not watched (\(error)); looked at again every \(Lifecycle.dropInLookInterval)"
                )
            }
        }
    }

    /// Every ``Lifecycle/dropInLookInterval``: a config folder that was missing or not watched
    /// is watched and read once it is there, and one replaced under the watch (a file system
    /// mounted over it, or unmounted) is watched anew and read.
    private func lookForDropInFolder() {
        guard let directory = lifecycle.dropInDirectory else { return }
        guard let watcher = lifecycle.dropInWatcher else {
            watchDropIns(directory, quiet: true)
            if lifecycle.dropInWatcher != nil { reloadDropIns(because: "the folder is there again") }
            return
        }
        let wasWatched = watcher.watchesDirectory
        if watcher.folderReplaced() || (!wasWatched && watcher.watchesDirectory) {
            reloadDropIns(because: "another folder is at its path (moved, made again or mounted)")
        }
    }

    /// SIGHUP reloads the system instance's drop-in files; any other signal (and SIGHUP to a
    /// user's kvd) stops kvd.
    func signalArrived(_ signal: Int32) {
        guard signal == SIGHUP, handler.isSystem else { return beginShutdown(signal: signal) }
        reloadDropIns(because: "SIGHUP")
    }

    /// The drop-in folders changed: they are read again once they have been quiet a moment
    /// (``Lifecycle/dropInSettle``), once whatever the number of events. A folder made among
    /// them (a dconf database) is watched from now on, so that the files put in it later count.
    func dropInsChanged() {
        guard let watcher = lifecycle.dropInWatcher, watcher.drain() else { return }
        _ = watcher.folderReplaced()
        lifecycle.dropInsChanged()
    }

    /// Reads the drop-in folders again when a change settled, and tries again to save their
    /// last good content while it is not saved (each pass).
    func reloadDropInsIfDue() {
        if lifecycle.takeDueDropInReload() { reloadDropIns(because: "a change in the folders") }
        if lifecycle.takeDueDropInLook() { lookForDropInFolder() }
        guard lifecycle.takeDueDropInSave(unsaved: handler.dropIns.isUnsaved) else { return }
        handler.dropIns.retrySave()
        lifecycle.dropInSaveTried(unsaved: handler.dropIns.isUnsaved)
    }

    /// Reads the drop-in files again and, when users would see a difference, queues the marker
    /// commit for this pass (its delivery sends the difference).
    func reloadDropIns(because reason: String) {
        guard let marker = handler.dropIns.reload(because: reason) else { return }
        commits.submitUnawaited(.dropInState, marker)
    }

    /// A marker commit was delivered: every mirror that has not seen its revision gets the
    /// difference of its peer's combination, as one batch.
    func deliverDropIns(_ commit: Commit) {
        guard let replies = handler.dropIns.deliver(commit, store: store) else { return }
        var encoded: [[Bool]: [SharedReply]] = [:]
        for connection in table.watchers.values {
            guard case .watching(let watch) = connection.phase, watch.isMirror, commit.revision > watch.since
            else { continue }
            let mine = replies(connection.dropInPeer)
            let shared = encoded[mine.profile] ?? mine.replies.map { SharedReply($0.encoded()) }
            encoded[mine.profile] = shared
            for reply in shared { deliver(.shared(reply), to: connection) }
        }
        log.info("drop-in files: generation \(handler.dropIns.generation) sent to users at revision \(commit.revision)")
    }
}

extension ClientConnection {
    /// The peer a mirror belongs to, for its drop-in profile (nil before accept told).
    var dropInPeer: DropInPeer? { uid.map { DropInPeer(uid: $0, gids: gids, dconfProfile: dconfProfile) } }
}
