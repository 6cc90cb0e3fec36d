/*
 * rackpilot/ws.h — WebSocket frames (RFC 6455), shared by rackpilotd (the console route) and the
 * rackpilot CLI (`rackpilot console`): pure functions over buffers, no I/O. common/ws.c.
 *
 * The peer is never trusted: every length is checked against the caller's cap before a byte of
 * payload is looked at.
 */
#ifndef RACKPILOT_WS_H
#define RACKPILOT_WS_H

#include <stddef.h>
#include <stdint.h>

enum rp_ws_op {
	RP_WS_CONT = 0x0,
	RP_WS_TEXT = 0x1,
	RP_WS_BINARY = 0x2,
	RP_WS_CLOSE = 0x8,
	RP_WS_PING = 0x9,
	RP_WS_PONG = 0xA,
};

/* A frame's header as rp_ws_parse read it. */
struct rp_ws_frame {
	int fin;
	enum rp_ws_op op;
	int masked;
	uint8_t mask[4];
	uint64_t len;  /* payload bytes */
	size_t header; /* header bytes: the payload starts at buf + header */
};

/* The longest header rp_ws_header writes (2 + 8 length + 4 mask). */
#define RP_WS_HEADER_MAX 14

/* Read the frame at the start of buf (n bytes). 1: a whole frame (header and payload) is in
 * buf and *f describes it; 0: more bytes are needed (*f untouched); -1: a protocol error the
 * connection must be closed for: reserved bits set, an unknown opcode, a control frame that is
 * fragmented or longer than 125 bytes, a length in the non-minimal or 63-bit-overflowing form,
 * a payload over max, or (need_mask 1, as a server requires of clients) an unmasked frame.
 * need_mask 0 takes frames masked or not. -1 comes as soon as the bytes that show it are in buf
 * (a length over max before its payload). Fragments, and what a CLOSE payload says, are the
 * caller's to check. */
int rp_ws_parse(const uint8_t *buf, size_t n, uint64_t max, int need_mask, struct rp_ws_frame *f);

/* Unmask (or mask: it is its own inverse) len bytes of payload in place with mask. */
void rp_ws_unmask(uint8_t *payload, uint64_t len, const uint8_t mask[4]);

/* Write the header of a frame (fin, op, len below 2^63; masked with mask when mask is not
 * NULL, as a client must) to out (RP_WS_HEADER_MAX bytes suffice), the length in its shortest
 * form. Returns the header's length. The caller masks the payload itself (rp_ws_unmask). */
size_t rp_ws_header(uint8_t *out, enum rp_ws_op op, int fin, uint64_t len, const uint8_t *mask);

/* The Sec-WebSocket-Accept value for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)),
 * 28 characters and a NUL into out. 0, or -1 (out untouched) when key is not exactly 16 bytes
 * in base64 (24 characters, canonical, no white space), as RFC 6455 4.2.1 requires. */
#define RP_WS_ACCEPT_BUF 29
int rp_ws_accept(const char *key, char out[RP_WS_ACCEPT_BUF]);

/* A new random Sec-WebSocket-Key (16 random bytes in base64) into out. 0, or -1 (out
 * untouched) when the system's random source fails. */
#define RP_WS_KEY_BUF 25
int rp_ws_key(char out[RP_WS_KEY_BUF]);

/* The subprotocol that carries a token where a client cannot send Authorization (a browser's
 * WebSocket): the client offers "rackpilot" and "rackpilot.bearer.<token>" in
 * Sec-WebSocket-Protocol; the server answers "rackpilot". */
#define RP_WS_PROTOCOL        "rackpilot"
#define RP_WS_PROTOCOL_BEARER "rackpilot.bearer."

#endif
