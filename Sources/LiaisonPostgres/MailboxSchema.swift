#if Postgres
  import Liaison

  /// The tables and functions of ``PostgresMailbox``es, part of ``Schema/create(_:)``.
  ///
  /// A mailbox's totals are kept in two rows, so that sends and removals do not wait for each
  /// other's commits. Its row in `liaison.mailbox` holds the next position and what was ever
  /// sent (messages and payload bytes); only sends (and a requeue) write it, each locking it
  /// first. Its row in `liaison.mailbox_receipt` holds what was ever removed; only removals,
  /// quarantines and requeues write it, each locking it first. What a mailbox holds is the
  /// difference, read in one snapshot (`count()`, `mailboxes()`). How many wait in quarantine is
  /// the sum of the two rows' `quarantined`: schema 4 counted them in the mailbox's row, which the
  /// upgrade leaves as it is (a host still running schema 4's code may write it meanwhile), and
  /// schema 5 counts the changes since in the receipt's. A send
  /// checks its limits against its own row, locked, less the receipt's last committed removals:
  /// a removal not yet committed is not subtracted, so the check only ever errs on the side of
  /// refusing.
  ///
  /// Sends take their positions one after another, in the order they commit: a receiver that
  /// has read up to a position never meets a message committed later at a smaller one. Each
  /// change is one statement (a call of one of these functions): one round trip, one commit, all
  /// or nothing. Locks are taken in one order, the mailbox's row before the receipt's row before
  /// the messages' rows, so that these functions never wait for each other in a cycle.
  ///
  /// A small send carries its messages in its notification (``CarriedMessages``): the receiver
  /// waiting for them delivers them without reading them back, one round trip sooner.
  enum MailboxSchema {
    /// The SQLSTATE of a send refused because a limit would be passed.
    static let overLimit = "LI001"

    /// A send of at most this many messages, of at most ``carriedBytes`` payload bytes in all,
    /// carries them in its notification (unless that would reach PostgreSQL's 8000 bytes).
    static let carriedMessages = 16
    static let carriedBytes = 4096

    /// An array of the physical row ids (`ctid`) of the mailbox's messages at the positions in
    /// the array `positions`, and with the ids in `ids` when given. Each is looked up alone, by
    /// a unique key, whatever the planner's statistics say: a table not yet analysed otherwise
    /// makes it scan the whole mailbox for every acknowledgement.
    ///
    /// The functions that match rows with it run with sequential scans off (``byRowID``), so that
    /// the rows are then fetched by their ids: a table of a few pages otherwise looks cheaper to
    /// scan whole, comparing every row with every id (`ctid = ANY(…)`): in a profile of the
    /// throughput benchmark, the largest part of the server's work.
    private static func rowsAt(_ positions: String, _ ids: String? = nil) -> String {
      let sameID = ids == nil ? "" : " AND t.id = a.id"
      let arrays = ids.map { "\(positions), \($0)) AS a(position, id" } ?? "\(positions)) AS a(position"
      return """
        ARRAY(SELECT (SELECT t.ctid FROM liaison.mailbox_message t
            WHERE t.namespace = p_namespace AND t.mailbox = p_mailbox AND t.position = a.position\(sameID))
          FROM unnest(\(arrays)))
        """
    }

    /// The statement of `liaison.mailbox_send` that stores the messages at the mailbox's next
    /// positions and reads back how many it stored, their bytes, and (when `carry`) the messages.
    ///
    /// `givenIDs`: some ids were given by the sender. A message whose given id was acknowledged
    /// within the retention (`remembered`) is skipped, and so is one whose id already waits
    /// (`ON CONFLICT … DO NOTHING`). A send of generated ids only (128 random bits each) leaves
    /// both out: the conflict clause makes every row a speculative insertion, with an index probe
    /// before it and a confirmation after, about a fifth of the insert's time. And an id made
    /// twice would then fail the whole send, where the clause would drop a message that its
    /// receipt says was stored.
    private static func storing(givenIDs: Bool) -> String {
      """
      WITH stored AS (
        INSERT INTO liaison.mailbox_message
          (namespace, mailbox, position, id, given_id, sent_at, sender, kind, payload)
        SELECT p_namespace, p_mailbox, mailbox_row.next_position + m.n - 1, m.id, m.given, p_sent_at, p_sender, m.kind,
          m.payload
        FROM unnest(p_ids, p_given, p_kinds, p_payloads) WITH ORDINALITY AS m(id, given, kind, payload, n)
        \(givenIDs ? "WHERE remembered IS NULL OR NOT (m.given AND m.id = ANY (remembered))" : "")
        ORDER BY m.n
        \(givenIDs ? "ON CONFLICT (namespace, mailbox, id) DO NOTHING" : "")
        RETURNING position, id, kind, payload)
      SELECT count(*), coalesce(sum(octet_length(payload)), 0),
        json_agg(json_build_object('position', position, 'id', id, 'kind', kind,
          'payload', translate(encode(payload, 'base64'), chr(10), '')) ORDER BY position) FILTER (WHERE carry)
      INTO added, added_bytes, carried FROM stored;
      """
    }

    /// The setting of a function that matches rows by ``rowsAt(_:_:)``.
    private static let byRowID = "SET enable_seqscan = off"

    static var tablesAndFunctions: String {
      let defaults = MailboxLimits()
      return """
        CREATE TABLE IF NOT EXISTS liaison.mailbox (
          namespace text NOT NULL,
          name text NOT NULL,
          next_position bigint NOT NULL DEFAULT 1,
          messages bigint NOT NULL DEFAULT 0,
          quarantined bigint NOT NULL DEFAULT 0,
          bytes bigint NOT NULL DEFAULT 0,
          maximum_message_size bigint NOT NULL DEFAULT \(defaults.maximumMessageSize),
          maximum_messages bigint NOT NULL DEFAULT \(defaults.maximumMessages),
          maximum_bytes bigint NOT NULL DEFAULT \(defaults.maximumBytes),
          PRIMARY KEY (namespace, name));
        -- Since schema 5, messages and bytes above count what was ever sent, and this row what was
        -- ever removed. The quarantined count is the sum of both rows' (the mailbox's is what
        -- schema 4 counted there, left as it is, so that a write of a host still running schema 4's
        -- code during the upgrade counts too; only the receipt's moves since).
        CREATE TABLE IF NOT EXISTS liaison.mailbox_receipt (
          namespace text NOT NULL,
          name text NOT NULL,
          removed_messages bigint NOT NULL DEFAULT 0,
          removed_bytes bigint NOT NULL DEFAULT 0,
          quarantined bigint NOT NULL DEFAULT 0,
          PRIMARY KEY (namespace, name));
        CREATE TABLE IF NOT EXISTS liaison.mailbox_message (
          namespace text NOT NULL,
          mailbox text NOT NULL,
          position bigint NOT NULL,
          id text NOT NULL,
          given_id boolean NOT NULL,
          sent_at float8 NOT NULL,
          sender text NOT NULL,
          kind smallint NOT NULL,
          payload bytea NOT NULL,
          quarantine_reason text,
          PRIMARY KEY (namespace, mailbox, position),
          UNIQUE (namespace, mailbox, id));
        CREATE TABLE IF NOT EXISTS liaison.mailbox_acknowledged (
          namespace text NOT NULL,
          mailbox text NOT NULL,
          id text NOT NULL,
          acknowledged_at float8 NOT NULL,
          PRIMARY KEY (namespace, mailbox, id));
        -- Since schema 6: the remembered ids past the retention are found, and forgotten in small
        -- batches, without reading the others.
        IF to_regclass('liaison.mailbox_acknowledged_by_age') IS NULL THEN
          CREATE INDEX mailbox_acknowledged_by_age ON liaison.mailbox_acknowledged (namespace, mailbox, acknowledged_at);
        END IF;

        -- Stores messages at the end of a mailbox, skipping given ids that wait or were
        -- acknowledged within the retention; refuses the whole batch (SQLSTATE LI001) when a
        -- limit would be passed. Returns how many were stored; notifies when any was.
        CREATE OR REPLACE FUNCTION liaison.mailbox_send(
          p_namespace text, p_mailbox text, p_sender text, p_sent_at float8, p_retention float8,
          p_ids text[], p_given boolean[], p_kinds smallint[], p_payloads bytea[]) RETURNS integer
        LANGUAGE plpgsql AS $send$
        DECLARE
          mailbox_row liaison.mailbox%ROWTYPE;
          gone_messages bigint;
          gone_bytes bigint;
          held_messages bigint;
          held_bytes bigint;
          largest bigint;
          incoming_bytes bigint;
          carry boolean;
          remembered text[];
          added integer;
          added_bytes bigint;
          carried json;
          wake_up text;
          carrying text;
        BEGIN
          SELECT * INTO mailbox_row FROM liaison.mailbox WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
          IF NOT FOUND THEN
            INSERT INTO liaison.mailbox (namespace, name) VALUES (p_namespace, p_mailbox) ON CONFLICT DO NOTHING;
            INSERT INTO liaison.mailbox_receipt (namespace, name) VALUES (p_namespace, p_mailbox) ON CONFLICT DO NOTHING;
            SELECT * INTO mailbox_row FROM liaison.mailbox WHERE namespace = p_namespace AND name = p_mailbox
              FOR UPDATE;
          END IF;
          SELECT max(octet_length(p)), sum(octet_length(p)) INTO largest, incoming_bytes FROM unnest(p_payloads) AS p;
          IF largest > mailbox_row.maximum_message_size THEN
            RAISE EXCEPTION USING ERRCODE = '\(overLimit)', MESSAGE = format(
              'A message for mailbox ''%s'' is %s bytes; the mailbox takes messages of at most %s bytes.',
              p_mailbox, largest, mailbox_row.maximum_message_size);
          END IF;
          carry := cardinality(p_ids) <= \(carriedMessages) AND incoming_bytes <= \(carriedBytes);
          -- Given ids acknowledged within the retention store nothing; those waiting neither
          -- (ON CONFLICT). Generated ids are never looked up, nor checked for conflicts when a
          -- send has no given id (128 random bits each). A waiting message with a given id
          -- may be in a removal not yet committed, which holds the receipt's row from its start:
          -- the send waits for it (FOR SHARE) and then finds the id acknowledged; a removal that
          -- starts later waits for the send, which finds the message waiting.
          IF true = ANY (p_given) THEN
            IF EXISTS (SELECT 1 FROM liaison.mailbox_message m
                WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.id = ANY (p_ids)) THEN
              PERFORM 1 FROM liaison.mailbox_receipt WHERE namespace = p_namespace AND name = p_mailbox FOR SHARE;
              IF NOT FOUND THEN
                INSERT INTO liaison.mailbox_receipt (namespace, name) VALUES (p_namespace, p_mailbox)
                  ON CONFLICT DO NOTHING;
                PERFORM 1 FROM liaison.mailbox_receipt WHERE namespace = p_namespace AND name = p_mailbox FOR SHARE;
              END IF;
            END IF;
            SELECT array_agg(a.id) INTO remembered FROM liaison.mailbox_acknowledged a
            WHERE a.namespace = p_namespace AND a.mailbox = p_mailbox AND a.id = ANY (p_ids)
              AND a.acknowledged_at > p_sent_at - p_retention;
            \(storing(givenIDs: true))
          ELSE
            \(storing(givenIDs: false))
          END IF;
          -- What the mailbox holds: what was sent (this row, locked) less what the last committed
          -- removals took (not locked: one not yet committed is not subtracted).
          SELECT r.removed_messages, r.removed_bytes INTO gone_messages, gone_bytes
          FROM liaison.mailbox_receipt r WHERE r.namespace = p_namespace AND r.name = p_mailbox;
          held_messages := mailbox_row.messages - coalesce(gone_messages, 0);
          held_bytes := mailbox_row.bytes - coalesce(gone_bytes, 0);
          IF held_messages + added > mailbox_row.maximum_messages THEN
            RAISE EXCEPTION USING ERRCODE = '\(overLimit)', MESSAGE = format(
              'Mailbox ''%s'' holds %s messages and takes at most %s; %s more do not fit.',
              p_mailbox, held_messages, mailbox_row.maximum_messages, added);
          END IF;
          IF held_bytes + added_bytes > mailbox_row.maximum_bytes THEN
            RAISE EXCEPTION USING ERRCODE = '\(overLimit)', MESSAGE = format(
              'Mailbox ''%s'' holds %s payload bytes and takes at most %s; %s more do not fit.',
              p_mailbox, held_bytes, mailbox_row.maximum_bytes, added_bytes);
          END IF;
          UPDATE liaison.mailbox SET next_position = next_position + cardinality(p_ids),
            messages = messages + added, bytes = bytes + added_bytes
          WHERE namespace = p_namespace AND name = p_mailbox;
          IF added > 0 THEN
            wake_up := concat_ws(' ', 'm', p_namespace, p_mailbox);
            IF carried IS NOT NULL THEN
              carrying := concat_ws(' ', wake_up, json_build_object('first', mailbox_row.next_position,
                'count', cardinality(p_ids), 'sentAt', p_sent_at, 'sender', p_sender, 'messages', carried));
            END IF;
            -- A notification's payload must be shorter than 8000 bytes.
            PERFORM pg_notify('liaison', CASE WHEN octet_length(carrying) < 8000 THEN carrying ELSE wake_up END);
          END IF;
          RETURN added;
        END $send$;

        -- Locks the receipt's row of a mailbox (made if missing), for a transaction that writes it.
        CREATE OR REPLACE FUNCTION liaison.mailbox_lock_receipt(p_namespace text, p_mailbox text) RETURNS void
        LANGUAGE plpgsql AS $lock_receipt$
        BEGIN
          PERFORM 1 FROM liaison.mailbox_receipt WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
          IF NOT FOUND THEN
            INSERT INTO liaison.mailbox_receipt (namespace, name) VALUES (p_namespace, p_mailbox) ON CONFLICT DO NOTHING;
            PERFORM 1 FROM liaison.mailbox_receipt WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
          END IF;
        END $lock_receipt$;

        -- Removes messages (those at the given positions with the given ids, or every quarantined
        -- one when the positions are null) and remembers their given ids. Returns the removed
        -- messages' positions and ids.
        CREATE OR REPLACE FUNCTION liaison.mailbox_remove(
          p_namespace text, p_mailbox text, p_positions bigint[], p_ids text[], p_now float8)
          RETURNS TABLE (removed_position bigint, removed_id text)
        LANGUAGE plpgsql \(byRowID) AS $remove$
        BEGIN
          PERFORM liaison.mailbox_lock_receipt(p_namespace, p_mailbox);
          IF p_positions IS NULL THEN
            SELECT array_agg(m.position), array_agg(m.id) INTO p_positions, p_ids FROM liaison.mailbox_message m
            WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.quarantine_reason IS NOT NULL;
          END IF;
          RETURN QUERY
          WITH gone AS (
            DELETE FROM liaison.mailbox_message m WHERE m.ctid = ANY (\(rowsAt("p_positions", "p_ids")))
            RETURNING m.position, m.id, m.given_id, octet_length(m.payload) AS size,
              m.quarantine_reason IS NOT NULL AS quarantined),
          remembered AS (
            INSERT INTO liaison.mailbox_acknowledged (namespace, mailbox, id, acknowledged_at)
            SELECT p_namespace, p_mailbox, g.id, p_now FROM gone g WHERE g.given_id
            ON CONFLICT (namespace, mailbox, id) DO UPDATE SET acknowledged_at = excluded.acknowledged_at),
          totals AS (
            UPDATE liaison.mailbox_receipt SET removed_messages = removed_messages + (SELECT count(*) FROM gone),
              removed_bytes = removed_bytes + (SELECT coalesce(sum(size), 0) FROM gone),
              quarantined = quarantined - (SELECT count(*) FROM gone WHERE gone.quarantined)
            WHERE namespace = p_namespace AND name = p_mailbox AND EXISTS (SELECT 1 FROM gone))
          SELECT g.position, g.id FROM gone g ORDER BY g.position;
        END $remove$;

        -- Sets messages aside with the reason why the receiver could not read them.
        CREATE OR REPLACE FUNCTION liaison.mailbox_quarantine(
          p_namespace text, p_mailbox text, p_positions bigint[], p_reasons text[]) RETURNS integer
        LANGUAGE plpgsql \(byRowID) AS $quarantine$
        DECLARE
          changed integer;
        BEGIN
          PERFORM liaison.mailbox_lock_receipt(p_namespace, p_mailbox);
          UPDATE liaison.mailbox_message m SET quarantine_reason = p_reasons[array_position(p_positions, m.position)]
          WHERE m.ctid = ANY (\(rowsAt("p_positions"))) AND m.quarantine_reason IS NULL;
          GET DIAGNOSTICS changed = ROW_COUNT;
          UPDATE liaison.mailbox_receipt SET quarantined = quarantined + changed
          WHERE namespace = p_namespace AND name = p_mailbox AND changed > 0;
          RETURN changed;
        END $quarantine$;

        -- Puts quarantined messages (those with the given ids, or all when the ids are null) back
        -- at the end of the mailbox, in their order. Returns how many; notifies when any was.
        CREATE OR REPLACE FUNCTION liaison.mailbox_requeue(p_namespace text, p_mailbox text, p_ids text[])
          RETURNS integer
        LANGUAGE plpgsql AS $requeue$
        DECLARE
          start_position bigint;
          moved integer;
        BEGIN
          SELECT next_position INTO start_position FROM liaison.mailbox
          WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
          IF start_position IS NULL THEN RETURN 0; END IF;
          PERFORM liaison.mailbox_lock_receipt(p_namespace, p_mailbox);
          WITH chosen AS (
            SELECT m.position, row_number() OVER (ORDER BY m.position) AS n FROM liaison.mailbox_message m
            WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.quarantine_reason IS NOT NULL
              AND (p_ids IS NULL OR m.id = ANY (p_ids)))
          UPDATE liaison.mailbox_message m SET position = start_position + c.n - 1, quarantine_reason = NULL
          FROM chosen c
          WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.position = c.position;
          GET DIAGNOSTICS moved = ROW_COUNT;
          IF moved > 0 THEN
            UPDATE liaison.mailbox SET next_position = next_position + moved
            WHERE namespace = p_namespace AND name = p_mailbox;
            UPDATE liaison.mailbox_receipt SET quarantined = quarantined - moved
            WHERE namespace = p_namespace AND name = p_mailbox;
            PERFORM pg_notify('liaison', concat_ws(' ', 'm', p_namespace, p_mailbox));
          END IF;
          RETURN moved;
        END $requeue$;
        """
    }
  }
#endif
