/* @ts-self-types="./bubble_wasm.d.ts" */

/**
 * A `/socket` handshake the engine accepted; `openChannels` consumes it.
 */
export class ChannelHandshake {
    static __wrap(ptr) {
        const obj = Object.create(ChannelHandshake.prototype);
        obj.__wbg_ptr = ptr;
        ChannelHandshakeFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        ChannelHandshakeFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_channelhandshake_free(ptr, 0);
    }
}
if (Symbol.dispose) ChannelHandshake.prototype[Symbol.dispose] = ChannelHandshake.prototype.free;

/**
 * The request edge of one host, as a JavaScript class.
 */
export class Edge {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        EdgeFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_edge_free(ptr, 0);
    }
    /**
     * Whether one more frame may go to a socket with `outstanding` frames
     * not yet written: `undefined`, or the close code of a slow consumer
     * (the frame is then not sent, and the socket is closed at once).
     * @param {number} outstanding
     * @returns {number | undefined}
     */
    admitFrame(outstanding) {
        const ret = wasm.edge_admitFrame(this.__wbg_ptr, outstanding);
        return ret === 0xFFFFFF ? undefined : ret;
    }
    /**
     * The `health` route's answer.
     * @returns {HttpAnswer}
     */
    static healthy() {
        const ret = wasm.edge_healthy();
        return ret;
    }
    /**
     * The edge of a host configured with `config` (the same JSON as the
     * engine's; it reads `ws_path` and `limits`).
     * @param {string} config
     */
    constructor(config) {
        const ptr0 = passStringToWasm0(config, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.edge_new(ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        EdgeFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * `400`, for a socket route the runtime cannot upgrade (no `Connection: upgrade`).
     * @returns {HttpAnswer}
     */
    static notAnUpgrade() {
        const ret = wasm.edge_notAnUpgrade();
        return ret;
    }
    /**
     * `404`, for a `page` route on a host without a page.
     * @returns {HttpAnswer}
     */
    static notFound() {
        const ret = wasm.edge_notFound();
        return ret;
    }
    /**
     * The `ready` route's answer (an in-process engine is ready once it answers).
     * @returns {HttpAnswer}
     */
    static ready() {
        const ret = wasm.edge_ready();
        return ret;
    }
    /**
     * What a request is: `method`, the raw `path` and `query` (without
     * `?`) as they arrived, and its `headers` (a `Headers` or a plain
     * object of lower-case names).
     * @param {string} method
     * @param {string} path
     * @param {string} query
     * @param {any} headers
     * @returns {Route & RouteCors}
     */
    routeRequest(method, path, query, headers) {
        const ptr0 = passStringToWasm0(method, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ptr1 = passStringToWasm0(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len1 = WASM_VECTOR_LEN;
        const ptr2 = passStringToWasm0(query, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len2 = WASM_VECTOR_LEN;
        const ret = wasm.edge_routeRequest(this.__wbg_ptr, ptr0, len0, ptr1, len1, ptr2, len2, headers);
        return ret;
    }
    /**
     * The `/v1/ws` endpoint's path.
     * @returns {string}
     */
    get wsPath() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.edge_wsPath(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
}
if (Symbol.dispose) Edge.prototype[Symbol.dispose] = Edge.prototype.free;

/**
 * The engine, as a JavaScript class.
 */
export class Engine {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        EngineFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_engine_free(ptr, 0);
    }
    /**
     * A binary frame from a client (answered as the protocols say).
     * @param {number} nowMs
     * @param {number} conn
     * @param {Uint8Array} bytes
     */
    binaryFrame(nowMs, conn, bytes) {
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_binaryFrame(this.__wbg_ptr, nowMs, conn, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Another engine over the same storage committed to `thread`: its
     * record is now at `headSeq` and `version` (the record's string token).
     * What a broker between engines reports; a lone engine never needs it.
     * @param {number} nowMs
     * @param {string} thread
     * @param {number} headSeq
     * @param {string} version
     */
    changed(nowMs, thread, headSeq, version) {
        const ptr0 = passStringToWasm0(thread, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ptr1 = passStringToWasm0(version, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len1 = WASM_VECTOR_LEN;
        const ret = wasm.engine_changed(this.__wbg_ptr, nowMs, ptr0, len0, headSeq, ptr1, len1);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Decides a `/socket` or `/app/:key` upgrade (an `Edge.routeRequest`
     * route of kind `channelsSocket`, whose `pusher` and `version` are the
     * last two arguments): `{accepted}`, the handshake `openChannels`
     * consumes, or `{refused}`, the plain-text response to answer instead
     * (a Pusher socket is always accepted: it hears its refusal).
     * @param {string | null | undefined} appKey
     * @param {boolean} protocol2
     * @param {boolean | null} [pusher]
     * @param {string | null} [version]
     * @returns {Handshake}
     */
    channelHandshake(appKey, protocol2, pusher, version) {
        var ptr0 = isLikeNone(appKey) ? 0 : passStringToWasm0(appKey, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len0 = WASM_VECTOR_LEN;
        var ptr1 = isLikeNone(version) ? 0 : passStringToWasm0(version, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len1 = WASM_VECTOR_LEN;
        const ret = wasm.engine_channelHandshake(this.__wbg_ptr, ptr0, len0, protocol2, isLikeNone(pusher) ? 0xFFFFFF : pusher ? 1 : 0, ptr1, len1);
        return ret;
    }
    /**
     * The socket is gone.
     * @param {number} nowMs
     * @param {number} conn
     */
    closed(nowMs, conn) {
        const ret = wasm.engine_closed(this.__wbg_ptr, nowMs, conn);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * What was sent to the socket so far has been written (answers `wantDrained`).
     * @param {number} nowMs
     * @param {number} conn
     */
    drained(nowMs, conn) {
        const ret = wasm.engine_drained(this.__wbg_ptr, nowMs, conn);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * A text frame from a client.
     * @param {number} nowMs
     * @param {number} conn
     * @param {string} text
     */
    frame(nowMs, conn, text) {
        const ptr0 = passStringToWasm0(text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_frame(this.__wbg_ptr, nowMs, conn, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * An HTTP request the edge routed to the engine (`/v1/threads…`,
     * `/api/apps/…`), with its raw path and query; the answer comes out as
     * a `respond` output echoing `req`.
     * @param {number} nowMs
     * @param {number} req
     * @param {string} method
     * @param {string} path
     * @param {string} query
     * @param {string | null | undefined} authorization
     * @param {string | null | undefined} idempotencyKey
     * @param {Uint8Array} body
     */
    handleHttp(nowMs, req, method, path, query, authorization, idempotencyKey, body) {
        const ptr0 = passStringToWasm0(method, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ptr1 = passStringToWasm0(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len1 = WASM_VECTOR_LEN;
        const ptr2 = passStringToWasm0(query, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len2 = WASM_VECTOR_LEN;
        var ptr3 = isLikeNone(authorization) ? 0 : passStringToWasm0(authorization, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len3 = WASM_VECTOR_LEN;
        var ptr4 = isLikeNone(idempotencyKey) ? 0 : passStringToWasm0(idempotencyKey, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len4 = WASM_VECTOR_LEN;
        const ptr5 = passArray8ToWasm0(body, wasm.__wbindgen_malloc);
        const len5 = WASM_VECTOR_LEN;
        const ret = wasm.engine_handleHttp(this.__wbg_ptr, nowMs, req, ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3, ptr4, len4, ptr5, len5);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Where to GET the key set when a `fetchKeys` output asks for it
     * (`auth.jwks.url`), or `undefined`.
     * @returns {string | undefined}
     */
    get keyUrl() {
        const ret = wasm.engine_keyUrl(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * The key set a `fetchKeys` output asked for could not be had
     * (unreachable, not `2xx`, too large): the set in use stays.
     * @param {number} nowMs
     */
    keysFailed(nowMs) {
        const ret = wasm.engine_keysFailed(this.__wbg_ptr, nowMs);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The document a `fetchKeys` output asked for, as fetched. A JWKS
     * replaces the key set in use and gives `undefined`; anything else
     * counts as a failed fetch (the set in use stays) and gives why.
     * @param {number} nowMs
     * @param {string} document
     * @returns {string | undefined}
     */
    keysLoaded(nowMs, document) {
        const ptr0 = passStringToWasm0(document, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_keysLoaded(this.__wbg_ptr, nowMs, ptr0, len0);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        let v2;
        if (ret[0] !== 0) {
            v2 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v2;
    }
    /**
     * The configured limits, with the keys of `bubble.toml`'s `[limits]`.
     * @returns {Limits}
     */
    limits() {
        const ret = wasm.engine_limits(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The `metrics` route's answer: the engine's metrics as Prometheus text.
     * @returns {HttpAnswer}
     */
    metricsResponse() {
        const ret = wasm.engine_metricsResponse(this.__wbg_ptr);
        return ret;
    }
    /**
     * An engine from `config` (JSON with the keys of `bubble.toml`), drawing
     * ids and version tokens from `seed`. It starts empty: history comes
     * from the host's storage through `read` outputs.
     * @param {string} config
     * @param {number} seed
     */
    constructor(config, seed) {
        const ptr0 = passStringToWasm0(config, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_new(ptr0, len0, seed);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        EngineFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * A `/socket` opened after `channelHandshake` accepted it; consumes
     * the accepted handshake.
     * @param {number} nowMs
     * @param {number} conn
     * @param {ChannelHandshake} handshake
     */
    openChannels(nowMs, conn, handshake) {
        _assertClass(handshake, ChannelHandshake);
        var ptr0 = handshake.__destroy_into_raw();
        const ret = wasm.engine_openChannels(this.__wbg_ptr, nowMs, conn, ptr0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * A `/v1/ws` socket opened with bearer `token` (header or `?access_token=`).
     * @param {number} nowMs
     * @param {number} conn
     * @param {string | null} [token]
     */
    openThreads(nowMs, conn, token) {
        var ptr0 = isLikeNone(token) ? 0 : passStringToWasm0(token, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_openThreads(this.__wbg_ptr, nowMs, conn, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Every batch before `batch` is durable (reported already), and so is
     * `batch` except the groups of the threads in `conflicts`, which the
     * storage refused (their `expect` no longer held).
     * @param {number} nowMs
     * @param {number} batch
     * @param {string[]} conflicts
     */
    persistFailed(nowMs, batch, conflicts) {
        const ptr0 = passArrayJsValueToWasm0(conflicts, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_persistFailed(this.__wbg_ptr, nowMs, batch, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Every batch up to and including `batch` is durable in the host's storage.
     * @param {number} nowMs
     * @param {number} batch
     */
    persisted(nowMs, batch) {
        const ret = wasm.engine_persisted(this.__wbg_ptr, nowMs, batch);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The next output as a plain object (`{kind: 'send', conn, frame}`…),
     * or `undefined` when there is nothing to do.
     * @returns {Output | undefined}
     */
    pollOutput() {
        const ret = wasm.engine_pollOutput(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * When to call `tick` next (milliseconds since the epoch), or `undefined`.
     * @returns {number | undefined}
     */
    pollTimeout() {
        const ret = wasm.engine_pollTimeout(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * A WebSocket Pong arrived.
     * @param {number} nowMs
     * @param {number} conn
     */
    pong(nowMs, conn) {
        const ret = wasm.engine_pong(this.__wbg_ptr, nowMs, conn);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The storage answered `read` with `result`, the JSON of its answer
     * (`{"events":[…]}`, `{"event":…}`, `{"thread":…}` or `{"threads":[…]}`).
     * An answer that does not parse fails the read (its request answers
     * `internal`) and throws `invalid_read_result`.
     * @param {number} nowMs
     * @param {number} read
     * @param {string} result
     */
    readDone(nowMs, read, result) {
        const ptr0 = passStringToWasm0(result, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_readDone(this.__wbg_ptr, nowMs, read, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The storage failed to answer `read`; the request waiting for it
     * answers `internal` (the host logs `message`).
     * @param {number} nowMs
     * @param {number} read
     * @param {string} message
     */
    readFailed(nowMs, read, message) {
        const ptr0 = passStringToWasm0(message, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.engine_readFailed(this.__wbg_ptr, nowMs, read, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * A `/v1/ws` socket that outlived the engine that served it (a
     * hibernated Durable Object socket), opened again with the `token` it
     * opened with, and subscribed again to `threads[i]` from `nextSeqs[i]`
     * (what `threadSubscriptions` reported on the engine before) without a
     * second `thread.subscription_opened`.
     * @param {number} nowMs
     * @param {number} conn
     * @param {string | null | undefined} token
     * @param {string[]} threads
     * @param {Float64Array} nextSeqs
     */
    resumeThreads(nowMs, conn, token, threads, nextSeqs) {
        var ptr0 = isLikeNone(token) ? 0 : passStringToWasm0(token, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len0 = WASM_VECTOR_LEN;
        const ptr1 = passArrayJsValueToWasm0(threads, wasm.__wbindgen_malloc);
        const len1 = WASM_VECTOR_LEN;
        const ptr2 = passArrayF64ToWasm0(nextSeqs, wasm.__wbindgen_malloc);
        const len2 = WASM_VECTOR_LEN;
        const ret = wasm.engine_resumeThreads(this.__wbg_ptr, nowMs, conn, ptr0, len0, ptr1, len1, ptr2, len2);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Where the subscriptions of `/v1/ws` socket `conn` stand, as
     * `[threadId, nextSeq]` pairs in id order (`nextSeq`: the last seq
     * delivered + 1 once the host has performed every output), or
     * `undefined` when `conn` is no open `/v1/ws` socket.
     * @param {number} conn
     * @returns {[string, number][] | undefined}
     */
    threadSubscriptions(conn) {
        const ret = wasm.engine_threadSubscriptions(this.__wbg_ptr, conn);
        return ret;
    }
    /**
     * The deadline from `pollTimeout` passed (early ticks are harmless).
     * @param {number} nowMs
     */
    tick(nowMs) {
        const ret = wasm.engine_tick(this.__wbg_ptr, nowMs);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
}
if (Symbol.dispose) Engine.prototype[Symbol.dispose] = Engine.prototype.free;

/**
 * A host's wall clock, clamped so the engine never sees it go backwards.
 */
export class MonotonicClock {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        MonotonicClockFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_monotonicclock_free(ptr, 0);
    }
    /**
     * A clock that has seen no reading yet.
     */
    constructor() {
        const ret = wasm.monotonicclock_new();
        this.__wbg_ptr = ret;
        MonotonicClockFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * `wallMs` (e.g. `Date.now()`), or the latest result when it is earlier.
     * @param {number} wallMs
     * @returns {number}
     */
    now(wallMs) {
        const ret = wasm.monotonicclock_now(this.__wbg_ptr, wallMs);
        return ret;
    }
}
if (Symbol.dispose) MonotonicClock.prototype[Symbol.dispose] = MonotonicClock.prototype.free;

/**
 * One seed's run of the simulator, as a JavaScript class.
 */
export class Simulation {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        SimulationFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_simulation_free(ptr, 0);
    }
    /**
     * Runs seed `seed` for `steps` steps at once: `undefined` when every
     * invariant held, otherwise the failure with its seed and shrunk replay.
     * @param {number} seed
     * @param {number} steps
     * @returns {string | undefined}
     */
    static check(seed, steps) {
        const ret = wasm.simulation_check(seed, steps);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Whether the run is over (passed or failed).
     * @returns {boolean}
     */
    finished() {
        const ret = wasm.simulation_finished(this.__wbg_ptr);
        return ret !== 0;
    }
    /**
     * Seed `seed`'s run of `steps` steps (then a final settle), not started.
     * @param {number} seed
     * @param {number} steps
     */
    constructor(seed, steps) {
        const ret = wasm.simulation_new(seed, steps);
        this.__wbg_ptr = ret;
        SimulationFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * Runs up to `n` steps; returns how many ran.
     * @param {number} n
     * @returns {number}
     */
    run(n) {
        const ret = wasm.simulation_run(this.__wbg_ptr, n);
        return ret >>> 0;
    }
    /**
     * The deployment as JSON (`bubble_core::sim::Snapshot`): clock, heads,
     * clients, subscriptions, presence views, and the violation if any.
     * @returns {string}
     */
    snapshot() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.simulation_snapshot(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * Runs the next step and describes it; `undefined` once the run is over.
     * @returns {string | undefined}
     */
    step() {
        const ret = wasm.simulation_step(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * The first invariant broken so far, if any.
     * @returns {string | undefined}
     */
    violation() {
        const ret = wasm.simulation_violation(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
}
if (Symbol.dispose) Simulation.prototype[Symbol.dispose] = Simulation.prototype.free;
function __wbg_get_imports() {
    const import0 = {
        __proto__: null,
        __wbg___wbindgen_is_function_1f9d30630b8b1d3d: function(arg0) {
            const ret = typeof(arg0) === 'function';
            return ret;
        },
        __wbg___wbindgen_is_object_3c45d4f2dde4e749: function(arg0) {
            const val = arg0;
            const ret = typeof(val) === 'object' && val !== null;
            return ret;
        },
        __wbg___wbindgen_string_get_0380ccaa2f57f0d9: function(arg0, arg1) {
            const obj = arg1;
            const ret = typeof(obj) === 'string' ? obj : undefined;
            var ptr1 = isLikeNone(ret) ? 0 : passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            var len1 = WASM_VECTOR_LEN;
            getDataViewMemory0().setInt32(arg0 + 4 * 1, len1, true);
            getDataViewMemory0().setInt32(arg0 + 4 * 0, ptr1, true);
        },
        __wbg___wbindgen_throw_41e9ee4f547fc59a: function(arg0, arg1) {
            throw new Error(getStringFromWasm0(arg0, arg1));
        },
        __wbg_call_187d372bd5fdd4aa: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.call(arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_channelhandshake_new: function(arg0) {
            const ret = ChannelHandshake.__wrap(arg0);
            return ret;
        },
        __wbg_get_31af05bd4842a84f: function() { return handleError(function (arg0, arg1) {
            const ret = Reflect.get(arg0, arg1);
            return ret;
        }, arguments); },
        __wbg_new_343a093a3c2ffb4e: function(arg0, arg1) {
            const ret = new Error(getStringFromWasm0(arg0, arg1));
            return ret;
        },
        __wbg_new_617a8cdb8bb1130e: function() {
            const ret = new Object();
            return ret;
        },
        __wbg_new_ee2291f50781bf1d: function() {
            const ret = new Array();
            return ret;
        },
        __wbg_of_20798cb14708764f: function(arg0, arg1) {
            const ret = Array.of(arg0, arg1);
            return ret;
        },
        __wbg_parse_0fc53dead14b3b42: function() { return handleError(function (arg0, arg1) {
            const ret = JSON.parse(getStringFromWasm0(arg0, arg1));
            return ret;
        }, arguments); },
        __wbg_push_2baf45db356cf468: function(arg0, arg1) {
            const ret = arg0.push(arg1);
            return ret;
        },
        __wbg_set_145a351398b48c65: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = Reflect.set(arg0, arg1, arg2);
            return ret;
        }, arguments); },
        __wbindgen_generic_0000000000000001: function(arg0) {
            // Cast intrinsic for `F64 -> Externref`.
            const ret = arg0;
            return ret;
        },
        __wbindgen_generic_0000000000000002: function(arg0, arg1) {
            // Cast intrinsic for `Ref(String) -> Externref`.
            const ret = getStringFromWasm0(arg0, arg1);
            return ret;
        },
        __wbindgen_init_externref_table: function() {
            const table = wasm.__wbindgen_externrefs;
            const offset = table.grow(4);
            table.set(0, undefined);
            table.set(offset + 0, undefined);
            table.set(offset + 1, null);
            table.set(offset + 2, true);
            table.set(offset + 3, false);
        },
    };
    return {
        __proto__: null,
        "./bubble_wasm_bg.js": import0,
    };
}

const ChannelHandshakeFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_channelhandshake_free(ptr, 1));
const EdgeFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_edge_free(ptr, 1));
const EngineFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_engine_free(ptr, 1));
const MonotonicClockFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_monotonicclock_free(ptr, 1));
const SimulationFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_simulation_free(ptr, 1));

function addToExternrefTable0(obj) {
    const idx = wasm.__externref_table_alloc();
    wasm.__wbindgen_externrefs.set(idx, obj);
    return idx;
}

function _assertClass(instance, klass) {
    if (!(instance instanceof klass)) {
        throw new Error(`expected instance of ${klass.name}`);
    }
}

let cachedDataViewMemory0 = null;
function getDataViewMemory0() {
    if (cachedDataViewMemory0 === null || cachedDataViewMemory0.buffer.detached === true || (cachedDataViewMemory0.buffer.detached === undefined && cachedDataViewMemory0.buffer !== wasm.memory.buffer)) {
        cachedDataViewMemory0 = new DataView(wasm.memory.buffer);
    }
    return cachedDataViewMemory0;
}

let cachedFloat64ArrayMemory0 = null;
function getFloat64ArrayMemory0() {
    if (cachedFloat64ArrayMemory0 === null || cachedFloat64ArrayMemory0.byteLength === 0) {
        cachedFloat64ArrayMemory0 = new Float64Array(wasm.memory.buffer);
    }
    return cachedFloat64ArrayMemory0;
}

function getStringFromWasm0(ptr, len) {
    return decodeText(ptr >>> 0, len);
}

let cachedUint8ArrayMemory0 = null;
function getUint8ArrayMemory0() {
    if (cachedUint8ArrayMemory0 === null || cachedUint8ArrayMemory0.byteLength === 0) {
        cachedUint8ArrayMemory0 = new Uint8Array(wasm.memory.buffer);
    }
    return cachedUint8ArrayMemory0;
}

function handleError(f, args) {
    try {
        return f.apply(this, args);
    } catch (e) {
        const idx = addToExternrefTable0(e);
        wasm.__wbindgen_exn_store(idx);
    }
}

function isLikeNone(x) {
    return x === undefined || x === null;
}

function passArray8ToWasm0(arg, malloc) {
    const ptr = malloc(arg.length * 1, 1) >>> 0;
    getUint8ArrayMemory0().set(arg, ptr / 1);
    WASM_VECTOR_LEN = arg.length;
    return ptr;
}

function passArrayF64ToWasm0(arg, malloc) {
    const ptr = malloc(arg.length * 8, 8) >>> 0;
    getFloat64ArrayMemory0().set(arg, ptr / 8);
    WASM_VECTOR_LEN = arg.length;
    return ptr;
}

function passArrayJsValueToWasm0(array, malloc) {
    const ptr = malloc(array.length * 4, 4) >>> 0;
    for (let i = 0; i < array.length; i++) {
        const add = addToExternrefTable0(array[i]);
        getDataViewMemory0().setUint32(ptr + 4 * i, add, true);
    }
    WASM_VECTOR_LEN = array.length;
    return ptr;
}

function passStringToWasm0(arg, malloc, realloc) {
    if (realloc === undefined) {
        const buf = cachedTextEncoder.encode(arg);
        const ptr = malloc(buf.length, 1) >>> 0;
        getUint8ArrayMemory0().subarray(ptr, ptr + buf.length).set(buf);
        WASM_VECTOR_LEN = buf.length;
        return ptr;
    }

    let len = arg.length;
    let ptr = malloc(len, 1) >>> 0;

    const mem = getUint8ArrayMemory0();

    let offset = 0;

    for (; offset < len; offset++) {
        const code = arg.charCodeAt(offset);
        if (code > 0x7F) break;
        mem[ptr + offset] = code;
    }
    if (offset !== len) {
        if (offset !== 0) {
            arg = arg.slice(offset);
        }
        ptr = realloc(ptr, len, len = offset + arg.length * 3, 1) >>> 0;
        const view = getUint8ArrayMemory0().subarray(ptr + offset, ptr + len);
        const ret = cachedTextEncoder.encodeInto(arg, view);

        offset += ret.written;
        ptr = realloc(ptr, len, offset, 1) >>> 0;
    }

    WASM_VECTOR_LEN = offset;
    return ptr;
}

function takeFromExternrefTable0(idx) {
    const value = wasm.__wbindgen_externrefs.get(idx);
    wasm.__externref_table_dealloc(idx);
    return value;
}

let cachedTextDecoder = new TextDecoder('utf-8', { ignoreBOM: true, fatal: true });
cachedTextDecoder.decode();
const MAX_SAFARI_DECODE_BYTES = 2146435072;
let numBytesDecoded = 0;
function decodeText(ptr, len) {
    numBytesDecoded += len;
    if (numBytesDecoded >= MAX_SAFARI_DECODE_BYTES) {
        cachedTextDecoder = new TextDecoder('utf-8', { ignoreBOM: true, fatal: true });
        cachedTextDecoder.decode();
        numBytesDecoded = len;
    }
    return cachedTextDecoder.decode(getUint8ArrayMemory0().subarray(ptr, ptr + len));
}

const cachedTextEncoder = new TextEncoder();

if (!('encodeInto' in cachedTextEncoder)) {
    cachedTextEncoder.encodeInto = function (arg, view) {
        const buf = cachedTextEncoder.encode(arg);
        view.set(buf);
        return {
            read: arg.length,
            written: buf.length
        };
    };
}

let WASM_VECTOR_LEN = 0;

let wasmModule, wasmInstance, wasm;
function __wbg_finalize_init(instance, module) {
    wasmInstance = instance;
    wasm = instance.exports;
    wasmModule = module;
    cachedDataViewMemory0 = null;
    cachedFloat64ArrayMemory0 = null;
    cachedUint8ArrayMemory0 = null;
    wasm.__wbindgen_start();
    return wasm;
}

async function __wbg_load(module, imports) {
    if (typeof Response === 'function' && module instanceof Response) {
        if (!module.ok) {
            throw new Error(`failed to fetch Wasm: ${module.status} ${module.statusText} fetching '${module.url}'`);
        }

        if (typeof WebAssembly.instantiateStreaming === 'function') {
            try {
                return await WebAssembly.instantiateStreaming(module, imports);
            } catch (e) {
                const validResponse = expectedResponseType(module.type);

                if (validResponse && module.headers.get('Content-Type') !== 'application/wasm') {
                    console.warn("`WebAssembly.instantiateStreaming` failed because your server does not serve Wasm with `application/wasm` MIME type. Falling back to `WebAssembly.instantiate` which is slower. Original error:\n", e);

                } else { throw e; }
            }
        }

        const bytes = await module.arrayBuffer();
        return await WebAssembly.instantiate(bytes, imports);
    } else {
        const instance = await WebAssembly.instantiate(module, imports);

        if (instance instanceof WebAssembly.Instance) {
            return { instance, module };
        } else {
            return instance;
        }
    }

    function expectedResponseType(type) {
        switch (type) {
            case 'basic': case 'cors': case 'default': return true;
        }
        return false;
    }
}

function initSync(module) {
    if (wasm !== undefined) return wasm;


    if (module !== undefined) {
        if (Object.getPrototypeOf(module) === Object.prototype) {
            ({module} = module)
        } else {
            console.warn('using deprecated parameters for `initSync()`; pass a single object instead')
        }
    }

    const imports = __wbg_get_imports();
    if (!(module instanceof WebAssembly.Module)) {
        module = new WebAssembly.Module(module);
    }
    const instance = new WebAssembly.Instance(module, imports);
    return __wbg_finalize_init(instance, module);
}

async function __wbg_init(module_or_path) {
    if (wasm !== undefined) return wasm;


    if (module_or_path !== undefined) {
        if (Object.getPrototypeOf(module_or_path) === Object.prototype) {
            ({module_or_path} = module_or_path)
        } else {
            console.warn('using deprecated parameters for the initialization function; pass a single object instead')
        }
    }

    if (module_or_path === undefined) {
        module_or_path = new URL('bubble_wasm_bg.wasm', import.meta.url);
    }
    const imports = __wbg_get_imports();

    if (typeof module_or_path === 'string' || (typeof Request === 'function' && module_or_path instanceof Request) || (typeof URL === 'function' && module_or_path instanceof URL)) {
        module_or_path = fetch(module_or_path);
    }

    const { instance, module } = await __wbg_load(await module_or_path, imports);

    return __wbg_finalize_init(instance, module);
}

export { initSync, __wbg_init as default };
