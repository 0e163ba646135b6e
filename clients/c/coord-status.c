/*
 * coord-status: asks one coord-node for its status, from C.
 *
 *   coord-status [--timeout-ms N] [--curve-server-key Z85 --curve-public-key Z85 --curve-secret-key Z85
 *                | --cert FILE.key_secret --server-cert NODE.key] ENDPOINT
 *
 * It speaks proto/coord/v1/coord.proto as the Swift coordinator does: a ZeroMQ DEALER, one frame per message,
 * each frame one serialized Envelope; first the Hello handshake, then a StatusRequest. Every reply is checked
 * (protocol version, request id, body) before anything in it is used, and anything wrong ends the program with
 * one sentence on stderr and exit status 1 (2 for a usage error). It never trusts the peer: a reply that
 * protobuf-c cannot unpack, an Error, a wrong request id or no reply at all are reported, not crashed on.
 *
 * The protobuf code in generated/ comes from scripts/generate-c-client.sh; libzmq is called only in the
 * "ZeroMQ funnel" section below.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <protobuf-c/protobuf-c.h>
#include <zmq.h>

#include "coord/v1/coord.pb-c.h"

#define PROGRAM "coord-status"
#define PROTOCOL_VERSION ((uint32_t) COORD__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT)
#define DEFAULT_TIMEOUT_MS 2000
#define MAX_TIMEOUT_MS 600000
/* A status with a long take's events is well under this; anything bigger is not a reply we want to hold. */
#define MAX_REPLY_BYTES (64 * 1024 * 1024)
#define Z85_KEY_CHARS 40
#define MAX_CERT_BYTES (64 * 1024)
#define EVENTS_SHOWN 20

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

/* ---- one sentence for whatever went wrong ---- */

static char problem[2048];

/* Records the sentence (printf-style) that main prints; returns -1 so callers can `return fail(...)`. */
__attribute__((format(printf, 1, 2))) static int fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(problem, sizeof problem, format, args);
    va_end(args);
    return -1;
}

/* ---- peer text, made safe to print ---- */

/*
 * Strings from the node are whatever bytes it sent (protobuf-c does not check UTF-8), so before they reach a
 * terminal every control character, C1 control and invalid UTF-8 byte is escaped as \xNN, and the text is
 * cut at a length a status line can hold. The result lives in one of a few rotating buffers, so several may
 * appear in one printf.
 */
#define SHOWN_BUFFERS 8
#define SHOWN_BYTES 512

static size_t utf8_sequence(const unsigned char *s)  /* length of a valid, printable sequence at s, or 0 */
{
    unsigned char c = s[0];
    if (c < 0x80)
        return (c >= 0x20 && c != 0x7f) ? 1 : 0;
    size_t n = (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
    if (n == 0)
        return 0;
    uint32_t code = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)  /* also stops at the terminating NUL */
            return 0;
        code = (code << 6) | (s[i] & 0x3f);
    }
    static const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < smallest[n] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff) || (code >= 0x80 && code <= 0x9f))
        return 0;
    return n;
}

static const char *shown(const char *text)
{
    static char buffers[SHOWN_BUFFERS][SHOWN_BYTES];
    static unsigned next;
    char *out = buffers[next++ % SHOWN_BUFFERS];
    size_t used = 0;
    const unsigned char *s = (const unsigned char *) (text ? text : "");
    while (*s) {
        size_t n = utf8_sequence(s);
        size_t need = n ? n : 4;
        if (used + need > SHOWN_BYTES - 4) {  /* room for "..." and the NUL */
            memcpy(out + used, "...", 3);
            used += 3;
            break;
        }
        if (n) {
            memcpy(out + used, s, n);
            s += n;
        } else {
            snprintf(out + used, 5, "\\x%02x", *s);
            s += 1;
        }
        used += need;
    }
    out[used] = '\0';
    return out;
}

/* "-" for an empty string, else the shown text. */
static const char *or_dash(const char *text)
{
    return (text && *text) ? shown(text) : "-";
}

/*
 * An enum value's name, as the .proto spells it ("VERSION_MISMATCH") or in lower case as `coord status` prints
 * states ("idle"); "value N" for one this client does not know (a proto3 enum holds any number).
 */
static const char *enum_name(const ProtobufCEnumDescriptor *descriptor, int value, int lower)
{
    static char buffers[4][64];
    static unsigned next;
    char *out = buffers[next++ % 4];
    const ProtobufCEnumValue *known = protobuf_c_enum_descriptor_get_value(descriptor, value);
    if (known == NULL || known->name == NULL) {
        snprintf(out, 64, "value %d (unknown to this client)", value);
        return out;
    }
    size_t i = 0;
    for (; known->name[i] && i < 63; i++)
        out[i] = (lower && known->name[i] >= 'A' && known->name[i] <= 'Z') ? (char) (known->name[i] - 'A' + 'a')
                                                                             : known->name[i];
    out[i] = '\0';
    return out;
}

/* The proto name of an Envelope body ("status"), for sentences about a reply of the wrong kind. */
static const char *body_name(Coord__V1__Envelope__BodyCase body)
{
    const ProtobufCFieldDescriptor *field =
        protobuf_c_message_descriptor_get_field(&coord__v1__envelope__descriptor, (unsigned) body);
    return (field && field->name) ? field->name : "an unknown body";
}

/* ---- the ZeroMQ funnel: every libzmq call of this program is in this section ---- */

/* One DEALER socket to one node, with the timeouts every operation on it obeys. */
struct link {
    void *context;
    void *socket;
    int timeout_ms;
};

/* The CURVE keys of a secured link, Z85 text; all empty: plain TCP. */
struct curve_keys {
    char server[Z85_KEY_CHARS + 1];
    char public_key[Z85_KEY_CHARS + 1];
    char secret[Z85_KEY_CHARS + 1];
};

/* Retries a libzmq call a signal interrupted (EINTR), as swift-nio does every system call; leaves its result. */
#define ZMQ_RETRY(result, call) \
    do { (result) = (call); } while ((result) == -1 && zmq_errno() == EINTR)

static int zmq_failed(const char *call)
{
    return fail("%s failed: %s.", call, zmq_strerror(zmq_errno()));
}

static int set_option(struct link *link, int option, const void *value, size_t size, const char *name)
{
    int rc;
    ZMQ_RETRY(rc, zmq_setsockopt(link->socket, option, value, size));
    if (rc != 0) {
        char call[96];
        snprintf(call, sizeof call, "zmq_setsockopt(%s)", name);
        return zmq_failed(call);
    }
    return 0;
}

static int set_int(struct link *link, int option, int value, const char *name)
{
    return set_option(link, option, &value, sizeof value, name);
}

/* The public key that belongs to a Z85 secret key; fails unless libzmq has CURVE. */
static int curve_public(const char *secret, char public_key[Z85_KEY_CHARS + 1])
{
    if (!zmq_has("curve"))
        return fail("this libzmq was built without CURVE, so it cannot use keys.");
    if (zmq_curve_public(public_key, secret) != 0)
        return fail("the secret key is not a CURVE key (%s).", zmq_strerror(zmq_errno()));
    return 0;
}

static void link_close(struct link *link)
{
    if (link->socket)
        zmq_close(link->socket);  /* linger 0: returns at once, drops anything unsent */
    if (link->context) {
        int rc;
        ZMQ_RETRY(rc, zmq_ctx_term(link->context));
        (void) rc;
    }
    link->socket = link->context = NULL;
}

/*
 * Opens a DEALER to the endpoint. Without the timeouts a DEALER with no peer blocks forever; ZMQ_IMMEDIATE
 * makes a send wait for a finished connection (and CURVE handshake) rather than queue, so "cannot connect"
 * and "no reply" are told apart.
 */
static int link_open(struct link *link, const char *endpoint, int timeout_ms, const struct curve_keys *keys)
{
    link->timeout_ms = timeout_ms;
    link->context = zmq_ctx_new();
    if (link->context == NULL)
        return zmq_failed("zmq_ctx_new");
    link->socket = zmq_socket(link->context, ZMQ_DEALER);
    if (link->socket == NULL)
        return zmq_failed("zmq_socket(ZMQ_DEALER)");
    int64_t max_reply = MAX_REPLY_BYTES;
    if (set_int(link, ZMQ_LINGER, 0, "ZMQ_LINGER") || set_int(link, ZMQ_SNDTIMEO, timeout_ms, "ZMQ_SNDTIMEO")
        || set_int(link, ZMQ_RCVTIMEO, timeout_ms, "ZMQ_RCVTIMEO") || set_int(link, ZMQ_IMMEDIATE, 1, "ZMQ_IMMEDIATE")
        || set_option(link, ZMQ_MAXMSGSIZE, &max_reply, sizeof max_reply, "ZMQ_MAXMSGSIZE"))
        return -1;
    if (keys->server[0]) {  /* load_keys has checked that this libzmq has CURVE */
        if (set_option(link, ZMQ_CURVE_SERVERKEY, keys->server, Z85_KEY_CHARS, "ZMQ_CURVE_SERVERKEY")
            || set_option(link, ZMQ_CURVE_PUBLICKEY, keys->public_key, Z85_KEY_CHARS, "ZMQ_CURVE_PUBLICKEY")
            || set_option(link, ZMQ_CURVE_SECRETKEY, keys->secret, Z85_KEY_CHARS, "ZMQ_CURVE_SECRETKEY"))
            return -1;
    }
    int rc;
    ZMQ_RETRY(rc, zmq_connect(link->socket, endpoint));
    if (rc != 0)
        return fail("cannot connect to it: %s.", zmq_strerror(zmq_errno()));
    return 0;
}

static int link_send(struct link *link, const void *bytes, size_t size, const char *what)
{
    int rc;
    ZMQ_RETRY(rc, zmq_send(link->socket, bytes, size, 0));
    if (rc == -1 && zmq_errno() == EAGAIN)
        return fail("no connection within %d ms to send the %s (nothing listening there, or, with CURVE, keys the node "
                    "does not accept).", link->timeout_ms, what);
    if (rc == -1)
        return fail("sending the %s failed: %s.", what, zmq_strerror(zmq_errno()));
    return 0;
}

/* Receives one reply frame into a malloc'ed buffer the caller frees. */
static int link_receive(struct link *link, unsigned char **bytes, size_t *size, const char *what)
{
    zmq_msg_t message;
    if (zmq_msg_init(&message) != 0)
        return zmq_failed("zmq_msg_init");
    int rc;
    ZMQ_RETRY(rc, zmq_msg_recv(&message, link->socket, 0));
    if (rc == -1) {
        int error = zmq_errno();
        zmq_msg_close(&message);
        if (error == EAGAIN)
            return fail("no reply to the %s within %d ms.", what, link->timeout_ms);
        return fail("receiving the reply to the %s failed: %s.", what, zmq_strerror(error));
    }
    if (zmq_msg_more(&message)) {
        /* The rest of the message is left in the socket; the program ends here anyway. */
        zmq_msg_close(&message);
        return fail("the reply to the %s has more than one frame; a coord reply is exactly one Envelope.", what);
    }
    *size = zmq_msg_size(&message);
    *bytes = malloc(*size ? *size : 1);
    if (*bytes == NULL) {
        zmq_msg_close(&message);
        return fail("out of memory for a reply of %zu bytes.", *size);
    }
    if (*size)
        memcpy(*bytes, zmq_msg_data(&message), *size);
    zmq_msg_close(&message);
    return 0;
}

/* ---- one request, one checked reply ---- */

/*
 * Sends `request` and returns its reply in *reply (free with coord__v1__envelope__free_unpacked) once it is a
 * coord Envelope of our protocol version, answers this request, and carries the body `expect`. An Error body
 * becomes the node's sentence.
 */
static int exchange(struct link *link, Coord__V1__Envelope *request, const char *what,
                   Coord__V1__Envelope__BodyCase expect, Coord__V1__Envelope **reply)
{
    *reply = NULL;
    size_t size = coord__v1__envelope__get_packed_size(request);
    unsigned char *packed = malloc(size ? size : 1);
    if (packed == NULL)
        return fail("out of memory for a request of %zu bytes.", size);
    if (coord__v1__envelope__pack(request, packed) != size) {
        free(packed);
        return fail("protobuf-c packed the %s into an unexpected number of bytes.", what);
    }
    int rc = link_send(link, packed, size, what);
    free(packed);
    if (rc != 0)
        return -1;

    unsigned char *bytes = NULL;
    size_t received = 0;
    if (link_receive(link, &bytes, &received, what) != 0)
        return -1;
    Coord__V1__Envelope *envelope = coord__v1__envelope__unpack(NULL, received, bytes);
    free(bytes);
    if (envelope == NULL)
        return fail("the reply to the %s is not a coord Envelope (%zu bytes that protobuf-c cannot unpack).", what,
                    received);

    /* Checked in this order because a node of another version may number or shape everything else differently. */
    if (envelope->protocol_version != PROTOCOL_VERSION) {
        if (envelope->protocol_version == 0)
            fail("the reply to the %s carries no protocol version (%zu bytes): it is not a coord reply.", what,
                 received);
        else
            fail("the node speaks protocol version %u, this client %u.", (unsigned) envelope->protocol_version,
                 (unsigned) PROTOCOL_VERSION);
    } else if (envelope->request_id != request->request_id) {
        fail("the reply to request %llu (the %s) answers request %llu.", (unsigned long long) request->request_id,
             what, (unsigned long long) envelope->request_id);
    } else if (envelope->body_case == COORD__V1__ENVELOPE__BODY_ERROR) {
        if (envelope->error == NULL)
            fail("the node answered the %s with an empty error.", what);
        else
            fail("the node answered the %s with error %s: %s", what,
                 enum_name(&coord__v1__error__code__descriptor, (int) envelope->error->code, 0),
                 or_dash(envelope->error->message));
    } else if (envelope->body_case == COORD__V1__ENVELOPE__BODY__NOT_SET) {
        fail("the reply to the %s has no body this client knows.", what);
    } else if (envelope->body_case != expect) {
        fail("the node answered the %s with a %s, expected a %s.", what, body_name(envelope->body_case),
             body_name(expect));
    } else if (envelope->hello_reply == NULL) {  /* any member of the body union: all are pointers */
        fail("the reply to the %s has an empty %s.", what, body_name(expect));
    } else {
        *reply = envelope;
        return 0;
    }
    coord__v1__envelope__free_unpacked(envelope, NULL);
    return -1;
}

/* ---- printing a node's status ---- */

/* A byte count in decimal units, as df -H and the sync report print them. */
static void print_bytes(const char *label, uint64_t bytes)
{
    static const char *units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double value = (double) bytes;
    size_t unit = 0;
    while (value >= 1000 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1000;
        unit++;
    }
    printf(unit ? "%s%.1f %s" : "%s%.0f %s", label, value, units[unit]);
}

static const Coord__V1__CameraStatus *camera_status(const Coord__V1__Status *status, const char *name)
{
    for (size_t i = 0; i < status->n_cameras && status->cameras; i++)
        if (status->cameras[i] && status->cameras[i]->camera && name && strcmp(status->cameras[i]->camera, name) == 0)
            return status->cameras[i];
    return NULL;
}

static void print_camera_figures(const Coord__V1__CameraStatus *c)
{
    printf("  frames %llu, dropped %llu, held %llu, last group %lld, record every %u, ",
           (unsigned long long) c->frames, (unsigned long long) c->dropped, (unsigned long long) c->held,
           (long long) c->last_group, (unsigned) (c->record_every ? c->record_every : 1));
    print_bytes("", c->bytes_written);
    printf(", timestamp noise %.1f µs, centre uncertainty %.1f µs, phase restarts %u%s%s",
           c->timestamp_noise_us, c->center_uncertainty_us, (unsigned) c->phase_restarts,
           c->finished ? ", finished" : "", c->disabled ? ", disabled" : "");
    if (c->error && *c->error)
        printf(", error: %s", shown(c->error));
}

static void print_status(const char *endpoint, const Coord__V1__HelloReply *hello, const Coord__V1__Status *status)
{
    printf("node %s at %s\n", or_dash(status->node), shown(endpoint));
    if (hello->node && status->node && strcmp(hello->node, status->node) != 0)
        printf("  (the handshake named it %s)\n", or_dash(hello->node));
    printf("  agent     coord-node %s on host %s, protocol %u\n", or_dash(hello->agent_version), or_dash(hello->host),
           (unsigned) PROTOCOL_VERSION);
    printf("  state     %s\n", enum_name(&coord__v1__status__state__descriptor, (int) status->state, 1));
    if (status->detail && *status->detail)
        printf("  detail    %s\n", shown(status->detail));
    printf("  take      %s\n", or_dash(status->take_id));
    printf("  pressure  %s", enum_name(&coord__v1__pressure_level__descriptor, (int) status->pressure, 1));
    if (status->pressure_cause && *status->pressure_cause)
        printf(": %s", shown(status->pressure_cause));
    printf("\n");
    if (status->frame_period_us > 0)
    {
        printf("  grid      t0 %lld µs, period %llu µs, rig now %lld µs, ", (long long) status->t0_us,
               (unsigned long long) status->frame_period_us, (long long) status->rig_now_us);
        if (status->stop_group)
            printf("stops before group %lld\n", (long long) status->stop_group);
        else
            printf("no stop set\n");
    }
    printf("  clock     local now %lld µs; time service: %s\n", (long long) status->local_now_us,
           or_dash(hello->time_service));
    const Coord__V1__NodeResources *r = status->resources ? status->resources : hello->resources;
    if (r) {
        printf("  resources %u CPUs, load %.2f per CPU; staging ", (unsigned) r->cpu_count, r->cpu_load);
        print_bytes("", r->free_disk_bytes);
        print_bytes(" free of ", r->disk_total_bytes);
        printf("\n");
    }

    /* The handshake lists the node's cameras; the status has figures only for a take's cameras. */
    size_t listed = (hello->cameras ? hello->n_cameras : 0);
    printf("cameras (%zu)\n", listed);
    for (size_t i = 0; i < listed; i++) {
        const Coord__V1__CameraInfo *info = hello->cameras[i];
        if (info == NULL)
            continue;
        printf("  %s  %s", or_dash(info->name), or_dash(info->source));
        if (info->device && *info->device)
            printf(" %s", shown(info->device));
        for (size_t k = 0; k < info->n_codecs && info->codecs; k++)
            printf(k ? ",%s" : ", codecs %s", or_dash(info->codecs[k]));
        const Coord__V1__CameraStatus *c = camera_status(status, info->name);
        if (c)
            print_camera_figures(c);
        else
            printf("  (not in a take)");
        printf("\n");
    }
    for (size_t i = 0; i < status->n_cameras && status->cameras; i++) {
        const Coord__V1__CameraStatus *c = status->cameras[i];
        int in_hello = 0;
        for (size_t j = 0; c && j < listed; j++)
            in_hello |= hello->cameras[j] && hello->cameras[j]->name && c->camera
                        && strcmp(hello->cameras[j]->name, c->camera) == 0;
        if (c == NULL || in_hello)
            continue;
        printf("  %s  (not in the handshake)", or_dash(c->camera));
        print_camera_figures(c);
        printf("\n");
    }

    if (status->n_events && status->events) {
        size_t first = status->n_events > EVENTS_SHOWN ? status->n_events - EVENTS_SHOWN : 0;
        if (first)
            printf("events (%zu, the last %d shown)\n", status->n_events, EVENTS_SHOWN);
        else
            printf("events (%zu)\n", status->n_events);
        for (size_t i = first; i < status->n_events; i++) {
            const Coord__V1__NodeEvent *e = status->events[i];
            if (e)
                printf("  %lld µs  %s  %s: %s\n", (long long) e->t_us, or_dash(e->camera), or_dash(e->kind),
                       or_dash(e->detail));
        }
    }
}

/* ---- keys ---- */

static int is_z85_key(const char *text)
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    if (strlen(text) != Z85_KEY_CHARS)
        return 0;
    for (const char *c = text; *c; c++)
        if (strchr(alphabet, *c) == NULL)
            return 0;
    return 1;
}

static int copy_key(char out[Z85_KEY_CHARS + 1], const char *text, const char *what)
{
    if (!is_z85_key(text))
        return fail("%s must be 40 Z85 characters (a CURVE key), not %zu characters.", what, strlen(text));
    memcpy(out, text, Z85_KEY_CHARS + 1);
    return 0;
}

static char *trim(char *s, const char *strip)
{
    s += strspn(s, strip);
    size_t n = strlen(s);
    while (n > 0 && strchr(strip, s[n - 1]))
        s[--n] = '\0';
    return s;
}

/*
 * Reads a ZeroMQ certificate (NAME.key or NAME.key_secret, as czmq's zcert, pyzmq's zmq.auth and `coord keys
 * new` write it): the `public-key = "…"` and `secret-key = "…"` lines; comments and other lines are skipped.
 * secret may be NULL for a public certificate.
 */
static int read_certificate(const char *path, char public_key[Z85_KEY_CHARS + 1], char *secret)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return fail("cannot read the certificate %s: %s.", path, strerror(errno));
    char *text = malloc(MAX_CERT_BYTES + 1);
    if (text == NULL) {
        fclose(file);
        return fail("out of memory reading %s.", path);
    }
    size_t size = fread(text, 1, MAX_CERT_BYTES + 1, file);
    int unreadable = ferror(file);
    fclose(file);
    if (unreadable || size > MAX_CERT_BYTES) {
        free(text);
        return unreadable ? fail("cannot read the certificate %s.", path)
                          : fail("%s is over %d bytes, too big for a ZeroMQ certificate.", path, MAX_CERT_BYTES);
    }
    text[size] = '\0';
    char found_public[Z85_KEY_CHARS + 1] = "", found_secret[Z85_KEY_CHARS + 1] = "";
    int rc = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\r\n", &save); line && rc == 0; line = strtok_r(NULL, "\r\n", &save)) {
        line = trim(line, " \t");
        char *equals = strchr(line, '=');
        if (line[0] == '#' || equals == NULL)
            continue;
        *equals = '\0';
        char *key = trim(line, " \t"), *value = trim(equals + 1, " \t\"'");
        if (strcmp(key, "public-key") == 0)
            rc = copy_key(found_public, value, "its public-key");
        else if (strcmp(key, "secret-key") == 0)
            rc = copy_key(found_secret, value, "its secret-key");
    }
    free(text);
    if (rc != 0) {
        char sentence[sizeof problem];
        snprintf(sentence, sizeof sentence, "%s", problem);
        return fail("%s: %s", path, sentence);
    }
    if (!found_public[0])
        return fail("%s is not a ZeroMQ certificate: it has no public-key line.", path);
    if (secret) {
        if (!found_secret[0])
            return fail("%s holds only a public key; give the NAME.key_secret file, which holds the pair.", path);
        char derived[Z85_KEY_CHARS + 1];
        if (curve_public(found_secret, derived) != 0)
            return -1;
        if (strcmp(derived, found_public) != 0)
            return fail("%s: its public-key does not belong to its secret-key.", path);
        memcpy(secret, found_secret, sizeof found_secret);
    }
    memcpy(public_key, found_public, sizeof found_public);
    return 0;
}

/* ---- the command line ---- */

struct options {
    const char *endpoint;
    int timeout_ms;
    const char *server_key, *public_key, *secret_key;  /* Z85 text from the command line */
    const char *cert, *server_cert;                      /* certificate files */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROGRAM " [--timeout-ms N] [--curve-server-key Z85 --curve-public-key Z85 --curve-secret-key Z85\n"
            "                    | --cert FILE.key_secret --server-cert NODE.key] ENDPOINT\n"
            "Asks the coord-node at ENDPOINT (e.g. tcp://host:5555) for its status: the Hello handshake, then a\n"
            "StatusRequest, each waiting at most N ms (default %d). With keys the link uses CURVE, as a node run\n"
            "with --cert and --authorized requires. Exit status: 0 printed, 1 failed, 2 usage error.\n",
            DEFAULT_TIMEOUT_MS);
}

static int parse_timeout(const char *text, int *timeout_ms)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < 1 || value > MAX_TIMEOUT_MS)
        return fail("--timeout-ms must be a whole number of milliseconds from 1 to %d, not '%s'.", MAX_TIMEOUT_MS,
                    shown(text));
    *timeout_ms = (int) value;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options) {.timeout_ms = DEFAULT_TIMEOUT_MS};
    const struct {
        const char *flag;
        const char **value;
    } valued[] = {
        {"--timeout-ms", NULL},  /* parsed as a number below */
        {"--curve-server-key", &o->server_key},
        {"--curve-public-key", &o->public_key},
        {"--curve-secret-key", &o->secret_key},
        {"--cert", &o->cert},
        {"--server-cert", &o->server_cert},
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(EXIT_OK);
        }
        size_t k = 0, count = sizeof valued / sizeof valued[0];
        while (k < count && strcmp(arg, valued[k].flag) != 0)
            k++;
        if (k < count) {
            if (i + 1 >= argc)
                return fail("%s needs a value.", arg);
            const char *value = argv[++i];
            if (valued[k].value)
                *valued[k].value = value;
            else if (parse_timeout(value, &o->timeout_ms) != 0)
                return -1;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return fail("unknown option '%s' (see --help).", shown(arg));
        } else if (o->endpoint) {
            return fail("one ENDPOINT only, but got '%s' and '%s'.", shown(o->endpoint), shown(arg));
        } else {
            o->endpoint = arg;
        }
    }
    if (o->endpoint == NULL)
        return fail("give the node's ENDPOINT, e.g. tcp://127.0.0.1:5555 (see --help).");
    if (o->server_key && o->server_cert)
        return fail("give the node's key once: --curve-server-key or --server-cert, not both.");
    if ((o->public_key || o->secret_key) && o->cert)
        return fail("give this client's keys once: --curve-public-key/--curve-secret-key or --cert, not both.");
    if (o->public_key && !o->secret_key)
        return fail("--curve-public-key needs --curve-secret-key too.");
    int server = o->server_key || o->server_cert, client = o->secret_key || o->cert;
    if (server != client)
        return fail(server ? "CURVE needs this client's keys too (--cert FILE.key_secret, or --curve-secret-key)."
                           : "CURVE needs the node's public key too (--server-cert NODE.key, or --curve-server-key).");
    return 0;
}

static int load_keys(const struct options *o, struct curve_keys *keys)
{
    memset(keys, 0, sizeof *keys);
    if (o->server_key && copy_key(keys->server, o->server_key, "--curve-server-key") != 0)
        return -1;
    if (o->server_cert && read_certificate(o->server_cert, keys->server, NULL) != 0)
        return -1;
    if (o->cert && read_certificate(o->cert, keys->public_key, keys->secret) != 0)
        return -1;
    if (o->secret_key) {
        /* The public key follows from the secret one; a --curve-public-key given too must agree with it. */
        if (copy_key(keys->secret, o->secret_key, "--curve-secret-key") != 0
            || curve_public(keys->secret, keys->public_key) != 0)
            return -1;
        char given[Z85_KEY_CHARS + 1];
        if (o->public_key && copy_key(given, o->public_key, "--curve-public-key") != 0)
            return -1;
        if (o->public_key && strcmp(given, keys->public_key) != 0)
            return fail("--curve-public-key does not belong to --curve-secret-key.");
    }
    return 0;
}

/* ---- the exchange ---- */

static int ask(const char *endpoint, int timeout_ms, const struct curve_keys *keys)
{
    struct link link = {0};
    Coord__V1__Envelope *hello_reply = NULL, *status_reply = NULL;
    int rc = link_open(&link, endpoint, timeout_ms, keys);

    if (rc == 0) {
        Coord__V1__Hello hello = COORD__V1__HELLO__INIT;
        char host[256] = "";  /* for the node's log only */
        if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
            snprintf(host, sizeof host, "%s", PROGRAM);
        hello.coordinator = host;
        Coord__V1__Envelope envelope = COORD__V1__ENVELOPE__INIT;
        envelope.protocol_version = PROTOCOL_VERSION;
        envelope.request_id = 1;
        envelope.body_case = COORD__V1__ENVELOPE__BODY_HELLO;
        envelope.hello = &hello;
        rc = exchange(&link, &envelope, "Hello", COORD__V1__ENVELOPE__BODY_HELLO_REPLY, &hello_reply);
    }
    if (rc == 0) {
        Coord__V1__StatusRequest status_request = COORD__V1__STATUS_REQUEST__INIT;
        Coord__V1__Envelope envelope = COORD__V1__ENVELOPE__INIT;
        envelope.protocol_version = PROTOCOL_VERSION;
        envelope.request_id = 2;
        envelope.body_case = COORD__V1__ENVELOPE__BODY_STATUS_REQUEST;
        envelope.status_request = &status_request;
        rc = exchange(&link, &envelope, "StatusRequest", COORD__V1__ENVELOPE__BODY_STATUS, &status_reply);
    }
    if (rc == 0)
        print_status(endpoint, hello_reply->hello_reply, status_reply->status);

    if (hello_reply)
        coord__v1__envelope__free_unpacked(hello_reply, NULL);
    if (status_reply)
        coord__v1__envelope__free_unpacked(status_reply, NULL);
    link_close(&link);
    return rc;
}

int main(int argc, char **argv)
{
    struct options options;
    struct curve_keys keys;
    if (parse_options(argc, argv, &options) != 0) {
        fprintf(stderr, PROGRAM ": %s\n", problem);
        return EXIT_USAGE;
    }
    if (load_keys(&options, &keys) != 0) {
        fprintf(stderr, PROGRAM ": %s\n", problem);
        return EXIT_USAGE;
    }
    if (ask(options.endpoint, options.timeout_ms, &keys) != 0) {
        fprintf(stderr, PROGRAM ": %s: %s\n", shown(options.endpoint), problem);
        return EXIT_FAILED;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, PROGRAM ": cannot write the status: %s.\n", strerror(errno));
        return EXIT_FAILED;
    }
    return EXIT_OK;
}
