// Asks NCCL's RAS service (a TCP port in every NCCL 2.24+ process, by
// default localhost:28028, NCCL_RAS_ADDR) for its view of the job, in
// bounded time.
//
// RAS speaks lines of text: the client says `CLIENT PROTOCOL 2`, the server
// `SERVER PROTOCOL N`; `TIMEOUT S` (how long RAS waits for the other
// processes) and `SET FORMAT json` (NCCL 2.28.7 and later; older releases
// answer `ERROR: Unknown command ...`) are answered `OK`; `STATUS` or
// `VERBOSE STATUS` is answered with the report, and the server closes the
// connection after it. QueryRas asks JSON where the server takes it, text
// (VERBOSE STATUS: more ranks named) otherwise.
//
// Every step has a deadline (poll(2) on a non-blocking socket): a RAS that
// is absent, refuses, or accepts and never answers costs at most
// connect_sec, then handshake_sec per step, then answer_sec, and is a
// normal outcome: the answer says "RAS not reachable at ADDRESS: why". No
// name is resolved (the static ncclwatch has no NSS): an address is
// numeric, IPv4 or [IPv6], or `localhost`.
//
// Thread safety: each call is independent; no signal is raised (a closed
// peer is an error, not SIGPIPE).

#ifndef TOOLS_RAS_CLIENT_H_
#define TOOLS_RAS_CLIENT_H_

#include <stdint.h>

#include <string>

namespace ncclwatch::tools {

inline constexpr char kDefaultRasAddress[] = "127.0.0.1:28028";

struct RasQueryOptions {
  double connect_sec = 1;     // to connect
  double handshake_sec = 1;   // for each answer before the report
  int ras_timeout_sec = 3;    // TIMEOUT: how long RAS waits for other processes
  double answer_sec = 6;      // for the whole report, after asking for it
  bool prefer_json = true;    // SET FORMAT json first; text where refused
  uint64_t max_bytes = 64ull << 20;
};

struct RasAnswer {
  bool ok = false;
  // "RAS not reachable at 127.0.0.1:28028: Connection refused", "RAS at
  // ...: no answer to STATUS within 6 s (120 bytes read)"...
  std::string error;
  std::string body;         // the report as the server sent it
  bool json = false;        // asked and given in JSON
  std::string address;      // as connected to ("127.0.0.1:28028")
  std::string format_note;  // why text: "SET FORMAT refused: ERROR: Unknown command set format json"
};

// "HOST:PORT", "HOST" (port 28028), "[V6]:PORT", ":PORT" (127.0.0.1).
// False with `error` for anything else.
bool ParseRasAddress(const std::string& address, std::string* host, int* port, std::string* error);

RasAnswer QueryRas(const std::string& address, const RasQueryOptions& opts = RasQueryOptions());

}  // namespace ncclwatch::tools

#endif  // TOOLS_RAS_CLIENT_H_
