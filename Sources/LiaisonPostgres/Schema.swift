#if Postgres
  import Liaison
  import PostgresNIO

  /// The tables of the schema `liaison`, shared by every namespace of a database, and the classes
  /// of Liaison's advisory locks (the first of their two 32-bit keys; the second is a row id).
  enum Schema {
    /// Held (for a transaction) while the schema is created.
    static let setupClass: Int32 = 0x4C49_5343  // "LISC"
    /// The advisory locks of ``PostgresLock``s.
    static let lockClass: Int32 = 0x4C49_4C4B  // "LILK"
    /// The claims of ``PostgresPresence``s.
    static let claimClass: Int32 = 0x4C49_5043  // "LIPC"
    /// Held by a presence's holder too; observers wait for it, shared, to learn of its end.
    static let watchClass: Int32 = 0x4C49_5057  // "LIPW"

    /// The version of the schema this code needs, kept as the schema's comment: a database set
    /// up by an older version gains the newer tables and functions at the next start.
    static let version = "Liaison schema 3"

    /// The channel of every notification; the payload says which namespace and name.
    static let channel = "liaison"

    /// Creates the schema, its tables and functions unless they are there in this ``version``:
    /// one statement, under a lock. Every statement in it may run again (`IF NOT EXISTS`, `OR
    /// REPLACE`).
    static func create(_ connector: Connector) async throws {
      let current = try await connector.query(
        "SELECT obj_description(to_regnamespace('liaison'), 'pg_namespace') = \(version)",
        doing: "look for Liaison's tables")
      if try current.first?.decode(Bool?.self) == true { return }
      let setup = PostgresQuery(
        unsafeSQL: """
          DO $liaison$ BEGIN
            PERFORM pg_advisory_xact_lock(\(setupClass), 0);
            CREATE SCHEMA IF NOT EXISTS liaison;
            CREATE TABLE IF NOT EXISTS liaison.lock (
              id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              namespace text NOT NULL,
              name text NOT NULL,
              fencing_token bigint NOT NULL DEFAULT 0,
              UNIQUE (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.presence (
              id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              namespace text NOT NULL,
              name text NOT NULL,
              host text,
              pid integer,
              info text,
              since timestamptz,
              backend_pid integer,
              UNIQUE (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.signal (
              namespace text NOT NULL,
              name text NOT NULL,
              state bigint NOT NULL DEFAULT 0,
              posts bigint NOT NULL DEFAULT 0,
              PRIMARY KEY (namespace, name));
            CREATE TABLE IF NOT EXISTS liaison.defaults_domain (
              namespace text NOT NULL,
              domain text NOT NULL,
              generation bigint NOT NULL DEFAULT 0,
              PRIMARY KEY (namespace, domain));
            CREATE TABLE IF NOT EXISTS liaison.defaults_entry (
              namespace text NOT NULL,
              domain text NOT NULL,
              key text NOT NULL,
              kind smallint NOT NULL,
              value bytea NOT NULL,
              PRIMARY KEY (namespace, domain, key));
            \(MailboxSchema.tablesAndFunctions)
            COMMENT ON SCHEMA liaison IS '\(version)';
          END $liaison$
          """)
      _ = try await connector.query(setup, doing: "create Liaison's tables in the schema 'liaison'", committing: true)
    }
  }
#endif
