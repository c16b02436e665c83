-- agent-memory: the ONE schema file.
--
-- Applied on every start by agent_memory.db (inside one transaction, under an advisory lock), so every
-- statement must be idempotent. Upgrades are appended at the end as new numbered sections that use
-- IF NOT EXISTS / ADD COLUMN IF NOT EXISTS / guarded DO blocks, then bump agent_memory_schema.version.
-- Never edit an applied section in a way that changes existing objects; never add a second file.

-- ---------------------------------------------------------------------------------------------------
-- Section 1: schema version, Chainlit data-layer tables, agents, agent_memories
-- ---------------------------------------------------------------------------------------------------

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE IF NOT EXISTS agent_memory_schema (
    singleton  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    version    INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Chainlit 2.x Postgres data layer (chainlit.data.chainlit_data_layer.ChainlitDataLayer) tables.
-- Column names and quoting follow what that data layer reads and writes.
CREATE TABLE IF NOT EXISTS "User" (
    "id"         TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text,
    "createdAt"  TIMESTAMP NOT NULL DEFAULT now(),
    "updatedAt"  TIMESTAMP NOT NULL DEFAULT now(),
    "metadata"   JSONB NOT NULL DEFAULT '{}'::jsonb,
    "identifier" TEXT NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS "Thread" (
    "id"        TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text,
    "createdAt" TIMESTAMP NOT NULL DEFAULT now(),
    "updatedAt" TIMESTAMP NOT NULL DEFAULT now(),
    "deletedAt" TIMESTAMP,
    "name"      TEXT,
    "metadata"  JSONB NOT NULL DEFAULT '{}'::jsonb,
    "tags"      TEXT[] NOT NULL DEFAULT '{}',
    "userId"    TEXT REFERENCES "User"("id") ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS "Thread_userId_updatedAt_idx" ON "Thread" ("userId", "updatedAt" DESC);

CREATE TABLE IF NOT EXISTS "Step" (
    "id"        TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text,
    "createdAt" TIMESTAMP NOT NULL DEFAULT now(),
    "updatedAt" TIMESTAMP NOT NULL DEFAULT now(),
    "parentId"  TEXT,
    "threadId"  TEXT REFERENCES "Thread"("id") ON DELETE CASCADE,
    "input"     TEXT,
    "metadata"  JSONB NOT NULL DEFAULT '{}'::jsonb,
    "name"      TEXT,
    "output"    TEXT,
    "type"      TEXT NOT NULL DEFAULT 'run',
    "showInput" TEXT DEFAULT 'json',
    "isError"   BOOLEAN DEFAULT FALSE,
    "startTime" TIMESTAMP NOT NULL DEFAULT now(),
    "endTime"   TIMESTAMP NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS "Step_threadId_startTime_idx" ON "Step" ("threadId", "startTime");
CREATE INDEX IF NOT EXISTS "Step_parentId_idx" ON "Step" ("parentId");

CREATE TABLE IF NOT EXISTS "Element" (
    "id"           TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text,
    "createdAt"    TIMESTAMP NOT NULL DEFAULT now(),
    "updatedAt"    TIMESTAMP NOT NULL DEFAULT now(),
    "threadId"     TEXT REFERENCES "Thread"("id") ON DELETE CASCADE,
    "stepId"       TEXT NOT NULL,
    "metadata"     JSONB NOT NULL DEFAULT '{}'::jsonb,
    "mime"         TEXT,
    "name"         TEXT NOT NULL,
    "objectKey"    TEXT,
    "url"          TEXT,
    "chainlitKey"  TEXT,
    "display"      TEXT,
    "size"         TEXT,
    "language"     TEXT,
    "page"         INTEGER,
    "autoPlay"     BOOLEAN,
    "playerConfig" JSONB,
    "props"        JSONB DEFAULT '{}'::jsonb
);
CREATE INDEX IF NOT EXISTS "Element_threadId_idx" ON "Element" ("threadId");
CREATE INDEX IF NOT EXISTS "Element_stepId_idx" ON "Element" ("stepId");

CREATE TABLE IF NOT EXISTS "Feedback" (
    "id"        TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text,
    "createdAt" TIMESTAMP NOT NULL DEFAULT now(),
    "updatedAt" TIMESTAMP NOT NULL DEFAULT now(),
    "stepId"    TEXT REFERENCES "Step"("id") ON DELETE CASCADE,
    "name"      TEXT NOT NULL,
    "value"     DOUBLE PRECISION NOT NULL,
    "comment"   TEXT
);
CREATE INDEX IF NOT EXISTS "Feedback_stepId_idx" ON "Feedback" ("stepId");

-- Declarative agent/team specs (AgentBuilder); a spec is an AutoGen-style JSON document.
CREATE TABLE IF NOT EXISTS agents (
    id          BIGSERIAL PRIMARY KEY,
    name        VARCHAR(255) NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    spec        JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Partitioned by user (version 10): a fresh database applied with the session setting agent_memory.partitions = N
-- (AGENT_MEMORY_PARTITIONS) gets agent_memories hash-partitioned on user_id in N partitions, so every query (all
-- start from the user) reads one partition. A partitioned table's keys must hold user_id: its primary key is
-- (user_id, id). Columns as below (section 1); later sections add theirs to both layouts alike.
DO $$
DECLARE
    n INTEGER := coalesce(nullif(current_setting('agent_memory.partitions', true), ''), '0')::integer;
BEGIN
    IF n > 0 AND to_regclass('agent_memories') IS NULL THEN
        CREATE TABLE agent_memories (
            id               UUID NOT NULL DEFAULT gen_random_uuid(),
            user_id          TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
            agent_id         TEXT,
            thread_id        TEXT,
            memory_key       VARCHAR(255) NOT NULL,
            memory_type      VARCHAR(50) NOT NULL DEFAULT 'note',
            description      TEXT NOT NULL DEFAULT '',
            content          TEXT NOT NULL,
            content_encoding VARCHAR(16) NOT NULL DEFAULT 'text' CHECK (content_encoding IN ('text', 'nul-escaped')),
            content_metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
            token_count      INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),
            char_count       BIGINT NOT NULL DEFAULT 0,
            content_sha256   CHAR(64) NOT NULL,
            created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
            last_accessed_at TIMESTAMPTZ,
            access_count     INTEGER NOT NULL DEFAULT 0,
            is_active        BOOLEAN NOT NULL DEFAULT TRUE,
            search_vector    TSVECTOR GENERATED ALWAYS AS (
                setweight(to_tsvector('english', coalesce(description, '')), 'A')
                || setweight(to_tsvector('english', left(content, 100000)), 'B')
            ) STORED,
            search_head      TEXT GENERATED ALWAYS AS (
                memory_key || ' ' || description || ' ' || left(content, 1000)
            ) STORED,
            CONSTRAINT agent_memories_pkey PRIMARY KEY (user_id, id),
            CONSTRAINT agent_memories_user_key_uniq UNIQUE (user_id, memory_key)
        ) PARTITION BY HASH (user_id);
        FOR i IN 0 .. n - 1 LOOP
            EXECUTE format('CREATE TABLE agent_memories_p%s PARTITION OF agent_memories '
                           'FOR VALUES WITH (MODULUS %s, REMAINDER %s)', i, n, i);
        END LOOP;
    END IF;
END $$;
-- Layer 2, the detail store (seed 001 section 5.1, improved).
-- content is the exact text; when it holds NUL characters (which Postgres TEXT refuses) it is stored
-- escaped and content_encoding says so; agent_memory.store decodes it back byte for byte.
-- agent_id / thread_id are free-form identifiers (CLI, MCP and non-Chainlit runs have no "Thread" row).
CREATE TABLE IF NOT EXISTS agent_memories (
    id               UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id          TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
    agent_id         TEXT,
    thread_id        TEXT,
    memory_key       VARCHAR(255) NOT NULL,
    memory_type      VARCHAR(50) NOT NULL DEFAULT 'note',
    description      TEXT NOT NULL DEFAULT '',
    content          TEXT NOT NULL,
    content_encoding VARCHAR(16) NOT NULL DEFAULT 'text' CHECK (content_encoding IN ('text', 'nul-escaped')),
    content_metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
    token_count      INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),
    char_count       BIGINT NOT NULL DEFAULT 0,
    content_sha256   CHAR(64) NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_accessed_at TIMESTAMPTZ,
    access_count     INTEGER NOT NULL DEFAULT 0,
    is_active        BOOLEAN NOT NULL DEFAULT TRUE,
    -- Full-text document: description weighs more than content; content is capped so a 20 MB log
    -- cannot exceed tsvector's 1 MB limit (the exact content is still stored in full).
    search_vector    TSVECTOR GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(description, '')), 'A')
        || setweight(to_tsvector('english', left(content, 100000)), 'B')
    ) STORED,
    -- Short text for trigram similarity (identifiers, hashes, typos).
    search_head      TEXT GENERATED ALWAYS AS (
        memory_key || ' ' || description || ' ' || left(content, 1000)
    ) STORED,
    CONSTRAINT agent_memories_user_key_uniq UNIQUE (user_id, memory_key)
);
DO $$ BEGIN  -- version 10: other tables refer to a memory by (user_id, id), the key a partitioned table can have
    IF (SELECT relkind FROM pg_class WHERE oid = 'agent_memories'::regclass) = 'r'
       AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'agent_memories_user_id_uniq') THEN
        ALTER TABLE agent_memories ADD CONSTRAINT agent_memories_user_id_uniq UNIQUE (user_id, id);
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS agent_memories_user_created_idx
    ON agent_memories (user_id, created_at DESC) WHERE is_active;
CREATE INDEX IF NOT EXISTS agent_memories_user_type_idx
    ON agent_memories (user_id, memory_type, created_at DESC) WHERE is_active;
CREATE INDEX IF NOT EXISTS agent_memories_thread_idx ON agent_memories (user_id, thread_id);
-- Shared text indexes; version 9 replaces them with user-first ones where btree_gin exists (see there).
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_class WHERE relname = 'agent_memories_user_search_vector_idx') THEN
        CREATE INDEX IF NOT EXISTS agent_memories_search_vector_idx ON agent_memories USING GIN (search_vector);
        CREATE INDEX IF NOT EXISTS agent_memories_search_head_trgm_idx
            ON agent_memories USING GIN (search_head gin_trgm_ops);
    END IF;
END $$;

INSERT INTO agent_memory_schema (singleton, version) VALUES (TRUE, 1)
ON CONFLICT (singleton) DO NOTHING;

-- ---------------------------------------------------------------------------------------------------
-- Later sections are appended below this line. Each ends with:
--   UPDATE agent_memory_schema SET version = N, applied_at = now() WHERE version < N;
-- ---------------------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------------------
-- Section 2 (version 2): MemoryContext persistence (issue: MemoryContext)
-- ---------------------------------------------------------------------------------------------------

-- One row per (user, thread, agent): the state of a MemoryContext (agent_memory/context_state.py) except its
-- messages (next table), saved after each change so a resumed thread rebuilds exactly the same context
-- (placeholders, excerpts, user layer). thread_id is free-form (Chainlit "Thread".id or any id); agent_key is '' when the context has no
-- agent id. Deleting the user deletes their contexts.
CREATE TABLE IF NOT EXISTS agent_memory_contexts (
    user_id    TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
    thread_id  TEXT NOT NULL,
    agent_key  TEXT NOT NULL DEFAULT '',
    state      JSONB NOT NULL,
    revision   BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, thread_id, agent_key)
);
-- Bumped by every save; a writer whose last known revision differs rewrites the whole state instead of
-- appending its changes (two contexts on one thread never interleave).
ALTER TABLE agent_memory_contexts ADD COLUMN IF NOT EXISTS revision BIGINT NOT NULL DEFAULT 0;

-- The context's messages, one row each (so saving after a change writes only what changed); the row above
-- keeps the rest of the state (user layer, counters). entry_id is stable within the context.
CREATE TABLE IF NOT EXISTS agent_memory_context_entries (
    user_id   TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    agent_key TEXT NOT NULL DEFAULT '',
    entry_id  BIGINT NOT NULL,
    entry     JSONB NOT NULL,
    PRIMARY KEY (user_id, thread_id, agent_key, entry_id),
    FOREIGN KEY (user_id, thread_id, agent_key)
        REFERENCES agent_memory_contexts (user_id, thread_id, agent_key) ON DELETE CASCADE
);

UPDATE agent_memory_schema SET version = 2, applied_at = now() WHERE version < 2;

-- ---------------------------------------------------------------------------------------------------
-- Section 3 (version 3): MCP bearer tokens (issue: MCP server)
-- ---------------------------------------------------------------------------------------------------

-- Bearer tokens of the MCP server's HTTP transport (agent_memory/mcp_auth.py). A token maps to exactly one
-- user; only its SHA-256 is stored (the token is printed once by `agent-memory token create`). token_prefix
-- (the first characters of the token) lets `token list` / `token revoke` name a token without storing it.
-- Revoked tokens are kept (revoked_at set) for audit; deleting the user deletes their tokens.
CREATE TABLE IF NOT EXISTS agent_memory_mcp_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
    token_sha256 CHAR(64) NOT NULL UNIQUE,
    token_prefix VARCHAR(32) NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS agent_memory_mcp_tokens_user_idx ON agent_memory_mcp_tokens (user_id);

UPDATE agent_memory_schema SET version = 3, applied_at = now() WHERE version < 3;

-- ---------------------------------------------------------------------------------------------------
-- Section 4 (version 4): embeddings / hybrid retrieval (issue: hybrid retrieval)
-- ---------------------------------------------------------------------------------------------------

-- Dense vectors live beside agent_memories, one row per (memory, vector space). model is the embedder's
-- model_id ("<model>@<dim>"), so changing the model or its dimension adds rows of a new space (filled by
-- `agent-memory reindex` or the background writer) instead of breaking anything; search only compares
-- vectors of the configured space. The column is an untyped `vector`; each space gets its own partial HNSW
-- expression index ((embedding::vector(dim)) ... WHERE model = '<model_id>'), created at run time by
-- agent_memory.embedding_worker because the model is only known then.
--
-- pgvector is optional. It is enabled when the server has it, unless the session sets
-- agent_memory.pgvector = 'off' (an operator's choice, and how tests build a database without it). Without it
-- there is no embeddings table and search stays lexical; `agent-memory db status` reports it.
DO $$
BEGIN
    IF coalesce(nullif(current_setting('agent_memory.pgvector', true), ''), 'on') <> 'off'
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS vector;
        EXCEPTION WHEN insufficient_privilege OR feature_not_supported OR undefined_file THEN
            RAISE NOTICE 'pgvector is installed but could not be enabled (%); search stays lexical', SQLERRM;
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        EXECUTE $ddl$
            CREATE TABLE IF NOT EXISTS agent_memory_embeddings (
                memory_id      UUID NOT NULL,
                user_id        TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
                model          TEXT NOT NULL,
                dim            INTEGER NOT NULL CHECK (dim > 0),
                content_sha256 CHAR(64) NOT NULL,
                embedding      vector NOT NULL,
                created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
                PRIMARY KEY (memory_id, model),
                CONSTRAINT agent_memory_embeddings_memory_fkey FOREIGN KEY (user_id, memory_id)
                    REFERENCES agent_memories (user_id, id) ON DELETE CASCADE,
                CHECK (vector_dims(embedding) = dim)
            )
        $ddl$;
        -- Exact (non-HNSW) path for users with few rows, and "what is missing" scans for reindex.
        EXECUTE 'CREATE INDEX IF NOT EXISTS agent_memory_embeddings_user_model_idx
                 ON agent_memory_embeddings (user_id, model)';
    END IF;
END
$$;

UPDATE agent_memory_schema SET version = 4, applied_at = now() WHERE version < 4;

-- ---------------------------------------------------------------------------------------------------
-- Section 5 (version 5): agents / UI auth (issues: agents, Chainlit UI)
-- ---------------------------------------------------------------------------------------------------

-- UI logins (issue: Chainlit UI). One scrypt hash per user, kept out of "User".metadata because Chainlit
-- rewrites that column on every login and sends it to the browser. Deleting the user deletes the login.
CREATE TABLE IF NOT EXISTS agent_memory_credentials (
    user_id       TEXT PRIMARY KEY REFERENCES "User"("id") ON DELETE CASCADE,
    password_hash TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

UPDATE agent_memory_schema SET version = 5, applied_at = now() WHERE version < 5;

-- ---------------------------------------------------------------------------------------------------
-- Section 6 (version 6): procedural memory / skills (issue: procedural memory)
-- ---------------------------------------------------------------------------------------------------

-- Skills (agent_memory/skills.py; seed 000 appendix B adapted): code that worked, frozen as a named, parameterised,
-- reusable function. A skill belongs to one (user, agent) pair: search and use never look past that pair.
-- parameters is a JSON Schema (type object) validated before every run; status gates use (only 'active' skills
-- are found or run). Counts describe the current version (a new version starts from zero, the old counts stay in
-- skill_versions). Text search mirrors agent_memories: a weighted tsvector plus a trigram head.
CREATE OR REPLACE FUNCTION agent_memory_join_words(TEXT[]) RETURNS TEXT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$ SELECT coalesce(array_to_string($1, ' '), '') $fn$;

CREATE TABLE IF NOT EXISTS skills (
    id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id         TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    name            VARCHAR(64) NOT NULL CHECK (name ~ '^[a-z][a-z0-9_-]*$'),
    description     TEXT NOT NULL DEFAULT '',
    code            TEXT NOT NULL,
    language        VARCHAR(20) NOT NULL DEFAULT 'python' CHECK (language IN ('python', 'bash')),
    parameters      JSONB NOT NULL DEFAULT '{"type": "object", "properties": {}}'::jsonb,
    example_prompts TEXT[] NOT NULL DEFAULT '{}',
    tags            TEXT[] NOT NULL DEFAULT '{}',
    status          VARCHAR(20) NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'pending_approval', 'rejected', 'disabled')),
    source          VARCHAR(20) NOT NULL DEFAULT 'agent',
    version         INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    execution_count INTEGER NOT NULL DEFAULT 0 CHECK (execution_count >= 0),
    success_count   INTEGER NOT NULL DEFAULT 0 CHECK (success_count >= 0),
    last_error      TEXT,
    metadata        JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at    TIMESTAMPTZ,
    search_vector   TSVECTOR GENERATED ALWAYS AS (
        setweight(to_tsvector('english', replace(replace(name, '_', ' '), '-', ' ')), 'A')
        || setweight(to_tsvector('english', coalesce(description, '')), 'A')
        || setweight(to_tsvector('english', agent_memory_join_words(example_prompts)), 'B')
        || setweight(to_tsvector('english', agent_memory_join_words(tags)), 'B')
    ) STORED,
    search_head     TEXT GENERATED ALWAYS AS (
        name || ' ' || left(description, 500) || ' ' || left(agent_memory_join_words(example_prompts), 500)
        || ' ' || agent_memory_join_words(tags)
    ) STORED,
    CONSTRAINT skills_user_agent_name_uniq UNIQUE (user_id, agent_id, name),
    CONSTRAINT skills_success_le_exec CHECK (success_count <= execution_count)
);
CREATE INDEX IF NOT EXISTS skills_user_agent_status_idx ON skills (user_id, agent_id, status);
CREATE INDEX IF NOT EXISTS skills_search_vector_idx ON skills USING GIN (search_vector);
CREATE INDEX IF NOT EXISTS skills_search_head_trgm_idx ON skills USING GIN (search_head gin_trgm_ops);

-- Every version of every skill (the current one included), so a re-registration never loses the code that ran
-- before, and `agent-memory skills show --version N` can print it. Counts are those the version reached.
CREATE TABLE IF NOT EXISTS skill_versions (
    skill_id        UUID NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    version         INTEGER NOT NULL,
    description     TEXT NOT NULL,
    code            TEXT NOT NULL,
    language        VARCHAR(20) NOT NULL,
    parameters      JSONB NOT NULL,
    example_prompts TEXT[] NOT NULL DEFAULT '{}',
    tags            TEXT[] NOT NULL DEFAULT '{}',
    execution_count INTEGER NOT NULL DEFAULT 0,
    success_count   INTEGER NOT NULL DEFAULT 0,
    source          VARCHAR(20) NOT NULL DEFAULT 'agent',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (skill_id, version)
);

-- Dense vectors of skills (name + description + example prompts), one per (skill, embedder space), written the first
-- time a search needs them and rewritten when the text changes (fingerprint). Plain float8[]: a user and agent have
-- few skills, so cosine is computed in Python and pgvector is not needed.
CREATE TABLE IF NOT EXISTS skill_embeddings (
    skill_id    UUID NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    fingerprint CHAR(64) NOT NULL,
    embedding   FLOAT8[] NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (skill_id, model)
);

-- The stemmed words of a skill's name, so search can cheaply find skills whose whole name appears in a request
-- (index-assisted overlap with the request's words instead of parsing every name on every search).
ALTER TABLE skills ADD COLUMN IF NOT EXISTS name_lexemes TEXT[] GENERATED ALWAYS AS (
    tsvector_to_array(to_tsvector('english', replace(replace(name, '_', ' '), '-', ' ')))
) STORED;
CREATE INDEX IF NOT EXISTS skills_name_lexemes_idx ON skills USING GIN (name_lexemes);

UPDATE agent_memory_schema SET version = 6, applied_at = now() WHERE version < 6;

-- ---------------------------------------------------------------------------------------------------
-- Section 7 (version 7): revocable UI sessions (issue: shared servers hold up)
-- ---------------------------------------------------------------------------------------------------

-- One session version per user. The UI writes it into each session token at login and honours a token only
-- while the version is unchanged: logout, a password change and removing the login bump it, deleting the
-- user deletes the row (and the "User" row the token names), so every earlier cookie stops working at once.
CREATE TABLE IF NOT EXISTS agent_memory_ui_sessions (
    user_id    TEXT PRIMARY KEY REFERENCES "User"("id") ON DELETE CASCADE,
    version    BIGINT NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

UPDATE agent_memory_schema SET version = 7, applied_at = now() WHERE version < 7;

-- ---------------------------------------------------------------------------------------------------
-- Section 8 (version 8): memory lifecycle (issue: memory lifecycle)
-- ---------------------------------------------------------------------------------------------------

-- is_active now means "current": shown by search, lists, stats and the user layer. A retracted memory
-- (status 'retracted') and a fact whose validity ended (valid_until set: a newer one on the same subject
-- replaced it) are not current, but stay retrievable by key. A memory past expires_at is gone for every read and
-- is deleted by `agent-memory purge`. version counts updates; the versions before the current one are kept in
-- agent_memory_versions, byte for byte.
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS status VARCHAR(16) NOT NULL DEFAULT 'held';
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS status_reason TEXT;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS subject TEXT;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS valid_from TIMESTAMPTZ;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS valid_until TIMESTAMPTZ;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;
ALTER TABLE agent_memories ADD COLUMN IF NOT EXISTS updated_at TIMESTAMPTZ;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'agent_memories_status_check') THEN
        ALTER TABLE agent_memories ADD CONSTRAINT agent_memories_status_check
            CHECK (status IN ('held', 'contested', 'retracted'));
    END IF;
END $$;
DO $$ BEGIN
    IF (SELECT version FROM agent_memory_schema) < 8 THEN  -- once: existing memories held since they were stored
        UPDATE agent_memories SET valid_from = created_at WHERE valid_from IS NULL;
        ALTER TABLE agent_memories ALTER COLUMN valid_from SET DEFAULT now();
        ALTER TABLE agent_memories ALTER COLUMN valid_from SET NOT NULL;
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS agent_memories_user_subject_idx
    ON agent_memories (user_id, subject, valid_from DESC) WHERE subject IS NOT NULL;
CREATE INDEX IF NOT EXISTS agent_memories_expires_idx ON agent_memories (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS agent_memory_versions (
    memory_id        UUID NOT NULL,
    user_id          TEXT NOT NULL,
    version          INTEGER NOT NULL CHECK (version >= 1),
    memory_type      VARCHAR(50) NOT NULL,
    description      TEXT NOT NULL,
    content          TEXT NOT NULL,
    content_encoding VARCHAR(16) NOT NULL,
    content_metadata JSONB NOT NULL,
    token_count      INTEGER NOT NULL,
    char_count       BIGINT NOT NULL,
    content_sha256   CHAR(64) NOT NULL,
    written_at       TIMESTAMPTZ NOT NULL,   -- when this version was written
    actor            TEXT,
    surface          VARCHAR(16) NOT NULL,
    PRIMARY KEY (memory_id, version),
    CONSTRAINT agent_memory_versions_memory_fkey FOREIGN KEY (user_id, memory_id)
        REFERENCES agent_memories (user_id, id) ON DELETE CASCADE
);

-- Who changed what: one row per store, update, retract, delete, import and purge of a memory. Rows go with their
-- user (forget-user removes everything); the forget itself is recorded without the user (user_id NULL).
CREATE TABLE IF NOT EXISTS agent_memory_audit (
    id          BIGSERIAL PRIMARY KEY,
    user_id     TEXT REFERENCES "User"("id") ON DELETE CASCADE,
    memory_key  VARCHAR(255),
    action      VARCHAR(16) NOT NULL,
    actor       TEXT,
    surface     VARCHAR(16) NOT NULL,
    reason      TEXT,
    details     JSONB NOT NULL DEFAULT '{}'::jsonb,
    at          TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS agent_memory_audit_user_idx ON agent_memory_audit (user_id, id DESC);

UPDATE agent_memory_schema SET version = 8, applied_at = now() WHERE version < 8;

-- ---------------------------------------------------------------------------------------------------
-- Section 9 (version 9): whole contents searchable, and search that stays within the user's rows
-- ---------------------------------------------------------------------------------------------------
-- A long content is split into chunks of 80 lines, each overlapping the previous by 8 lines, and each chunk gets
-- its own full-text vector: the error on the last line of a 10,000-line log is found, and a hit says which lines
-- matched (retrieve them with lines=A-B). agent_memories.search_vector keeps the description and the content's
-- head. A trigger keeps the chunks in step with the content (store, update, import alike); a line longer than
-- what one vector holds is indexed up to 200,000 characters per chunk.
CREATE TABLE IF NOT EXISTS agent_memory_chunks (
    memory_id     UUID NOT NULL,
    user_id       TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
    chunk_no      INTEGER NOT NULL,
    line_start    INTEGER NOT NULL,
    line_end      INTEGER NOT NULL,
    search_vector TSVECTOR NOT NULL,
    PRIMARY KEY (memory_id, chunk_no),
    CONSTRAINT agent_memory_chunks_memory_fkey FOREIGN KEY (user_id, memory_id)
        REFERENCES agent_memories (user_id, id) ON DELETE CASCADE
);

CREATE OR REPLACE FUNCTION agent_memory_rechunk() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory_chunks WHERE user_id = NEW.user_id AND memory_id = NEW.id;
    END IF;
    -- Short contents need no chunks: the memory's own vector covers them whole.
    IF length(NEW.content) > 6000 OR length(NEW.content) - length(replace(NEW.content, E'\n', '')) >= 80 THEN
        INSERT INTO agent_memory_chunks (memory_id, user_id, chunk_no, line_start, line_end, search_vector)
        SELECT NEW.id, NEW.user_id, c.chunk_no, min(t.n), max(t.n),
               to_tsvector('english', left(string_agg(t.line, E'\n' ORDER BY t.n), 200000))
        FROM string_to_table(NEW.content, E'\n') WITH ORDINALITY AS t(line, n)
        CROSS JOIN LATERAL (
            SELECT (t.n - 1) / 80 AS chunk_no
            UNION ALL  -- the first 8 lines of a chunk also end the previous one (the overlap)
            SELECT (t.n - 1) / 80 - 1 WHERE t.n > 80 AND (t.n - 1) % 80 < 8
        ) c
        GROUP BY c.chunk_no;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS agent_memories_rechunk ON agent_memories;
CREATE TRIGGER agent_memories_rechunk AFTER INSERT OR UPDATE OF content ON agent_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_rechunk();

-- Text search that starts from the user: with btree_gin, the GIN indexes lead with user_id, so a query whose
-- words only other users have never visits their rows (it cost ~1 s at 100,000 rows of other users). Without the
-- extension (a server lacking contrib) the plain GIN indexes stay and search is the same, only slower at scale.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS btree_gin;
        EXCEPTION WHEN insufficient_privilege OR feature_not_supported OR undefined_file THEN
            RAISE NOTICE 'btree_gin could not be enabled (%); text search indexes stay shared by all users', SQLERRM;
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') THEN
        CREATE INDEX IF NOT EXISTS agent_memories_user_search_vector_idx
            ON agent_memories USING GIN (user_id, search_vector);
        CREATE INDEX IF NOT EXISTS agent_memories_user_search_head_trgm_idx
            ON agent_memories USING GIN (user_id, search_head gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS agent_memory_chunks_user_search_vector_idx
            ON agent_memory_chunks USING GIN (user_id, search_vector);
        DROP INDEX IF EXISTS agent_memories_search_vector_idx;
        DROP INDEX IF EXISTS agent_memories_search_head_trgm_idx;
    ELSE
        CREATE INDEX IF NOT EXISTS agent_memory_chunks_search_vector_idx
            ON agent_memory_chunks USING GIN (search_vector);
    END IF;
END
$$;

DO $$ BEGIN
    IF (SELECT version FROM agent_memory_schema) < 9 THEN  -- once: chunk the long contents stored before
        UPDATE agent_memories SET content = content
        WHERE length(content) > 6000 OR length(content) - length(replace(content, E'\n', '')) >= 80;
    END IF;
END $$;

UPDATE agent_memory_schema SET version = 9, applied_at = now() WHERE version < 9;

-- ---------------------------------------------------------------------------------------------------
-- Section 10 (version 10): ready for partitioning by user
-- ---------------------------------------------------------------------------------------------------
-- Tables that refer to a memory do so by (user_id, memory_id), the key a table partitioned by user can have (see
-- section 1; a fresh database gets these keys there). An older database gets them here: versions learn their
-- user, and the foreign keys on the memory id alone are replaced.
ALTER TABLE agent_memory_versions ADD COLUMN IF NOT EXISTS user_id TEXT;
DO $$
DECLARE
    t TEXT;
BEGIN
    IF EXISTS (SELECT 1 FROM agent_memory_versions WHERE user_id IS NULL) THEN
        UPDATE agent_memory_versions v SET user_id = m.user_id FROM agent_memories m
        WHERE m.id = v.memory_id AND v.user_id IS NULL;
    END IF;
    ALTER TABLE agent_memory_versions ALTER COLUMN user_id SET NOT NULL;
    FOREACH t IN ARRAY ARRAY['agent_memory_embeddings', 'agent_memory_versions', 'agent_memory_chunks'] LOOP
        CONTINUE WHEN to_regclass(t) IS NULL;  -- no embeddings table without pgvector
        IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = t || '_memory_id_fkey') THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_memory_id_fkey');
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = t || '_memory_fkey') THEN
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (user_id, memory_id) '
                           'REFERENCES agent_memories (user_id, id) ON DELETE CASCADE', t, t || '_memory_fkey');
        END IF;
    END LOOP;
END $$;

UPDATE agent_memory_schema SET version = 10, applied_at = now() WHERE version < 10;

-- ---------------------------------------------------------------------------------------------------
-- Section 11 (version 11): the parts of paths, URLs and image references are words
-- ---------------------------------------------------------------------------------------------------
-- PostgreSQL's parser keeps "registry.example/api:e58bc3a" or "/var/log/nginx/error.log" as one lexeme, so
-- "e58bc3a" or "nginx" found nothing. Text is indexed (and queries are read) with / : @ = as word breaks.
CREATE OR REPLACE FUNCTION agent_memory_words(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT regexp_replace(t, '[/:@=]+', ' ', 'g') $$;

CREATE OR REPLACE FUNCTION agent_memory_rechunk() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM agent_memory_chunks WHERE user_id = NEW.user_id AND memory_id = NEW.id;
    END IF;
    -- Short contents need no chunks: the memory's own vector covers them whole.
    IF length(NEW.content) > 6000 OR length(NEW.content) - length(replace(NEW.content, E'\n', '')) >= 80 THEN
        INSERT INTO agent_memory_chunks (memory_id, user_id, chunk_no, line_start, line_end, search_vector)
        SELECT NEW.id, NEW.user_id, c.chunk_no, min(t.n), max(t.n),
               to_tsvector('english', agent_memory_words(left(string_agg(t.line, E'\n' ORDER BY t.n), 200000)))
        FROM string_to_table(NEW.content, E'\n') WITH ORDINALITY AS t(line, n)
        CROSS JOIN LATERAL (
            SELECT (t.n - 1) / 80 AS chunk_no
            UNION ALL  -- the first 8 lines of a chunk also end the previous one (the overlap)
            SELECT (t.n - 1) / 80 - 1 WHERE t.n > 80 AND (t.n - 1) % 80 < 8
        ) c
        GROUP BY c.chunk_no;
    END IF;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
                   WHERE d.adrelid = 'agent_memories'::regclass AND a.attname = 'search_vector'
                     AND pg_get_expr(d.adbin, d.adrelid) LIKE '%agent_memory_words%') THEN
        -- the generated column is rebuilt (its indexes go with it and are made again below)
        ALTER TABLE agent_memories DROP COLUMN search_vector;
        ALTER TABLE agent_memories ADD COLUMN search_vector TSVECTOR GENERATED ALWAYS AS (
            setweight(to_tsvector('english', agent_memory_words(coalesce(description, ''))), 'A')
            || setweight(to_tsvector('english', agent_memory_words(left(content, 100000))), 'B')
        ) STORED;
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') THEN
            CREATE INDEX IF NOT EXISTS agent_memories_user_search_vector_idx
                ON agent_memories USING GIN (user_id, search_vector);
        ELSE
            CREATE INDEX IF NOT EXISTS agent_memories_search_vector_idx ON agent_memories USING GIN (search_vector);
        END IF;
        -- and the chunks of long contents, with the same word breaks
        UPDATE agent_memories SET content = content
        WHERE length(content) > 6000 OR length(content) - length(replace(content, E'\n', '')) >= 80;
    END IF;
END $$;

UPDATE agent_memory_schema SET version = 11, applied_at = now() WHERE version < 11;

-- ---------------------------------------------------------------------------------------------------
-- Section 12 (version 12): what a vector was made of (issue: search)
-- ---------------------------------------------------------------------------------------------------
-- A long output's vector used to be made of its head; it is now made of its failure lines and last lines
-- (agent_memory.search._embedding_text). recipe says which: vectors of long outputs with an older recipe count
-- as missing, so `agent-memory reindex` renews them. Adding a column with a constant default rewrites nothing.
DO $$
BEGIN
    IF to_regclass('agent_memory_embeddings') IS NOT NULL THEN
        ALTER TABLE agent_memory_embeddings ADD COLUMN IF NOT EXISTS recipe SMALLINT NOT NULL DEFAULT 1;
    END IF;
END $$;

UPDATE agent_memory_schema SET version = 12, applied_at = now() WHERE version < 12;
