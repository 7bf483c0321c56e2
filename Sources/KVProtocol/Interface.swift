import KVValues

/// The varlink interfaces kvd serves, with their descriptions as served by
/// `org.varlink.service.GetInterfaceDescription`.
public enum DefaultsInterface {
    public static let name = "io.kvd.Defaults"

    /// The interface description; declares everything the contract fixes.
    public static let description = """
        # kvd: domain/key property-list values, durable and versioned.
        # Values are typed JSON: strings, bools, integers (no '.'/exponent), reals (always with
        # '.' or an exponent), arrays, dictionaries ({"$dict": {...}} when a key starts with '$'),
        # {"$date": "RFC 3339"} and {"$data": "base64"}.
        interface io.kvd.Defaults

        # One key's new value; no value means the key is removed.
        type Change (key: string, value: ?object)

        # A key's value and the store revision at which it last changed.
        method Get(domain: string, key: string) -> (value: object, revision: int)

        # Sets one key. With ifRevision, only if the key last changed at that revision (0: absent).
        method Set(domain: string, key: string, value: object, ifRevision: ?int) -> (revision: int)

        # Removes one key, or the whole domain when no key is given.
        method Delete(domain: string, key: ?string) -> (revision: int)

        # Commits all changes atomically. With ifRevision, only if the domain last changed then.
        method Apply(domain: string, changes: []Change, ifRevision: ?int) -> (revision: int)

        # All values of a domain.
        method List(domain: string) -> (values: [string]object, revision: int)

        # List, and also the keys whose stored values kvd cannot read (it keeps them as they are
        # in the domain file), each with the reason; those keys are not in values.
        method ListAll(domain: string) -> (values: [string]object, revision: int, unreadable: [string]string)

        # The names of all domains.
        method Domains() -> (domains: []string)

        # Needs "more": the first reply (initial: true) has the current values, each later
        # reply the changes of one commit.
        method Watch(domain: string, key: ?string) -> (revision: int, changes: []Change, initial: bool)

        error NotFound (domain: string, key: ?string)
        error InvalidName (name: string, reason: string)
        error InvalidValue (reason: string)
        error RevisionMismatch (revision: int)
        error StorageFailure (reason: string)
        error TooLarge (limit: int)
        # The key's stored value cannot be read (it is kept as it is); nothing changed.
        error UnreadableValue (domain: string, key: string, reason: string)

        """

    /// Fully qualified error names.
    public enum Error {
        public static let notFound = "io.kvd.Defaults.NotFound"
        public static let invalidName = "io.kvd.Defaults.InvalidName"
        public static let invalidValue = "io.kvd.Defaults.InvalidValue"
        public static let revisionMismatch = "io.kvd.Defaults.RevisionMismatch"
        public static let storageFailure = "io.kvd.Defaults.StorageFailure"
        public static let tooLarge = "io.kvd.Defaults.TooLarge"
        public static let unreadableValue = "io.kvd.Defaults.UnreadableValue"
    }
}

/// `org.varlink.service`, which every varlink service implements.
public enum ServiceInterface {
    public static let name = "org.varlink.service"

    public static let description = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """

    /// Fully qualified error names.
    public enum Error {
        public static let interfaceNotFound = "org.varlink.service.InterfaceNotFound"
        public static let methodNotFound = "org.varlink.service.MethodNotFound"
        public static let methodNotImplemented = "org.varlink.service.MethodNotImplemented"
        public static let invalidParameter = "org.varlink.service.InvalidParameter"
        public static let expectedMore = "org.varlink.service.ExpectedMore"
        public static let permissionDenied = "org.varlink.service.PermissionDenied"
    }
}
