#if Postgres
  import Liaison

  /// The tables and functions of ``PostgresMailbox``es, part of ``Schema/create(_:)``.
  ///
  /// Every change to a mailbox first locks its row in `liaison.mailbox`, which keeps the totals
  /// its limits are checked against and the next position. Sends therefore take their positions
  /// one after another, in the order they commit: a receiver that has read up to a position never
  /// meets a message committed later at a smaller one. Each change is one statement (a call of
  /// one of these functions): one round trip, one commit, all or nothing.
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
    /// the primary key, whatever the planner's statistics say: a table not yet analysed
    /// otherwise makes it scan the whole mailbox for every acknowledgement.
    private static func rowsAt(_ positions: String, _ ids: String? = nil) -> String {
      let sameID = ids == nil ? "" : " AND t.id = a.id"
      let arrays = ids.map { "\(positions), \($0)) AS a(position, id" } ?? "\(positions)) AS a(position"
      return """
        ARRAY(SELECT (SELECT t.ctid FROM liaison.mailbox_message t
            WHERE t.namespace = p_namespace AND t.mailbox = p_mailbox AND t.position = a.position\(sameID))
          FROM unnest(\(arrays)))
        """
    }

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

        -- Stores messages at the end of a mailbox, skipping given ids that wait or were
        -- acknowledged within the retention; refuses the whole batch (SQLSTATE LI001) when a
        -- limit would be passed. Returns how many were stored; notifies when any was.
        CREATE OR REPLACE FUNCTION liaison.mailbox_send(
          p_namespace text, p_mailbox text, p_sender text, p_sent_at float8, p_retention float8,
          p_ids text[], p_given boolean[], p_kinds smallint[], p_payloads bytea[]) RETURNS integer
        LANGUAGE plpgsql AS $send$
        DECLARE
          mailbox_row liaison.mailbox%ROWTYPE;
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
          -- (ON CONFLICT). Generated ids are never looked up.
          IF true = ANY (p_given) THEN
            SELECT array_agg(a.id) INTO remembered FROM liaison.mailbox_acknowledged a
            WHERE a.namespace = p_namespace AND a.mailbox = p_mailbox AND a.id = ANY (p_ids)
              AND a.acknowledged_at > p_sent_at - p_retention;
          END IF;
          WITH stored AS (
            INSERT INTO liaison.mailbox_message
              (namespace, mailbox, position, id, given_id, sent_at, sender, kind, payload)
            SELECT p_namespace, p_mailbox, mailbox_row.next_position + m.n - 1, m.id, m.given, p_sent_at, p_sender, m.kind,
              m.payload
            FROM unnest(p_ids, p_given, p_kinds, p_payloads) WITH ORDINALITY AS m(id, given, kind, payload, n)
            WHERE remembered IS NULL OR NOT (m.given AND m.id = ANY (remembered))
            ORDER BY m.n
            ON CONFLICT (namespace, mailbox, id) DO NOTHING
            RETURNING position, id, kind, payload)
          SELECT count(*), coalesce(sum(octet_length(payload)), 0),
            json_agg(json_build_object('position', position, 'id', id, 'kind', kind,
              'payload', translate(encode(payload, 'base64'), chr(10), '')) ORDER BY position) FILTER (WHERE carry)
          INTO added, added_bytes, carried FROM stored;
          IF mailbox_row.messages + added > mailbox_row.maximum_messages THEN
            RAISE EXCEPTION USING ERRCODE = '\(overLimit)', MESSAGE = format(
              'Mailbox ''%s'' holds %s messages and takes at most %s; %s more do not fit.',
              p_mailbox, mailbox_row.messages, mailbox_row.maximum_messages, added);
          END IF;
          IF mailbox_row.bytes + added_bytes > mailbox_row.maximum_bytes THEN
            RAISE EXCEPTION USING ERRCODE = '\(overLimit)', MESSAGE = format(
              'Mailbox ''%s'' holds %s payload bytes and takes at most %s; %s more do not fit.',
              p_mailbox, mailbox_row.bytes, mailbox_row.maximum_bytes, added_bytes);
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

        -- Removes messages (those at the given positions with the given ids, or every quarantined
        -- one when the positions are null) and remembers their given ids. Returns the removed
        -- messages' positions and ids.
        CREATE OR REPLACE FUNCTION liaison.mailbox_remove(
          p_namespace text, p_mailbox text, p_positions bigint[], p_ids text[], p_now float8)
          RETURNS TABLE (removed_position bigint, removed_id text)
        LANGUAGE plpgsql AS $remove$
        BEGIN
          PERFORM 1 FROM liaison.mailbox WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
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
            UPDATE liaison.mailbox SET messages = messages - (SELECT count(*) FROM gone),
              bytes = bytes - (SELECT coalesce(sum(size), 0) FROM gone),
              quarantined = quarantined - (SELECT count(*) FROM gone WHERE gone.quarantined)
            WHERE namespace = p_namespace AND name = p_mailbox AND EXISTS (SELECT 1 FROM gone))
          SELECT g.position, g.id FROM gone g ORDER BY g.position;
        END $remove$;

        -- Sets messages aside with the reason why the receiver could not read them.
        CREATE OR REPLACE FUNCTION liaison.mailbox_quarantine(
          p_namespace text, p_mailbox text, p_positions bigint[], p_reasons text[]) RETURNS integer
        LANGUAGE plpgsql AS $quarantine$
        DECLARE
          changed integer;
        BEGIN
          PERFORM 1 FROM liaison.mailbox WHERE namespace = p_namespace AND name = p_mailbox FOR UPDATE;
          UPDATE liaison.mailbox_message m SET quarantine_reason = p_reasons[array_position(p_positions, m.position)]
          WHERE m.ctid = ANY (\(rowsAt("p_positions"))) AND m.quarantine_reason IS NULL;
          GET DIAGNOSTICS changed = ROW_COUNT;
          UPDATE liaison.mailbox SET quarantined = quarantined + changed
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
          WITH chosen AS (
            SELECT m.position, row_number() OVER (ORDER BY m.position) AS n FROM liaison.mailbox_message m
            WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.quarantine_reason IS NOT NULL
              AND (p_ids IS NULL OR m.id = ANY (p_ids)))
          UPDATE liaison.mailbox_message m SET position = start_position + c.n - 1, quarantine_reason = NULL
          FROM chosen c
          WHERE m.namespace = p_namespace AND m.mailbox = p_mailbox AND m.position = c.position;
          GET DIAGNOSTICS moved = ROW_COUNT;
          IF moved > 0 THEN
            UPDATE liaison.mailbox SET next_position = next_position + moved, quarantined = quarantined - moved
            WHERE namespace = p_namespace AND name = p_mailbox;
            PERFORM pg_notify('liaison', concat_ws(' ', 'm', p_namespace, p_mailbox));
          END IF;
          RETURN moved;
        END $requeue$;
        """
    }
  }
#endif
