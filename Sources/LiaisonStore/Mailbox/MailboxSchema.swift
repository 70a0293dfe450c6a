import GRDB
import Liaison

/// The mailboxes' store: its name and its schema, one migration per version.
extension Mailbox {
  /// The store database that holds every mailbox.
  static let storeName = ContainerLayout.Store.mailboxes.rawValue

  static let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("mailbox v1") { db in
      // One B-tree ordered by (mailbox, position): a receive is a range scan, an acknowledgement
      // a delete by key. Positions come from mailbox_totals.next_position, which is never
      // lowered, so a receiver that has seen position n never skips a new message.
      try db.execute(
        sql: """
          CREATE TABLE mailbox_message (
            mailbox TEXT NOT NULL,
            position INTEGER NOT NULL,
            id TEXT NOT NULL,
            given_id INTEGER NOT NULL,
            sender TEXT NOT NULL,
            sent_at REAL NOT NULL,
            kind INTEGER NOT NULL,
            payload BLOB NOT NULL,
            quarantine_reason TEXT,
            PRIMARY KEY (mailbox, position)
          ) WITHOUT ROWID;
          CREATE UNIQUE INDEX mailbox_message_given_id ON mailbox_message (mailbox, id) WHERE given_id = 1;
          CREATE TABLE mailbox_acknowledged (
            mailbox TEXT NOT NULL,
            id TEXT NOT NULL,
            acknowledged_at REAL NOT NULL,
            PRIMARY KEY (mailbox, id)
          ) WITHOUT ROWID;
          CREATE INDEX mailbox_acknowledged_age ON mailbox_acknowledged (acknowledged_at);
          CREATE TABLE mailbox_totals (
            mailbox TEXT PRIMARY KEY,
            next_position INTEGER NOT NULL,
            messages INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            quarantined INTEGER NOT NULL
          ) WITHOUT ROWID;
          """)
    }
    // The limits are the mailbox's own, in its totals row (NULL: the defaults).
    migrator.registerMigration("mailbox v2: limits") { db in
      try db.execute(
        sql: """
          ALTER TABLE mailbox_totals ADD COLUMN maximum_message_size INTEGER;
          ALTER TABLE mailbox_totals ADD COLUMN maximum_messages INTEGER;
          ALTER TABLE mailbox_totals ADD COLUMN maximum_bytes INTEGER;
          """)
    }
    return migrator
  }()
}
