// QueryRas against FakeRasServer (fake_ras_server.h), which speaks RAS's
// protocol or misbehaves. The tests wait on QueryRas's result; its
// deadlines are the bound.
#include "tools/ras/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tools/ras/fake_ras_server.h"

namespace ncclwatch::tools {
namespace {

RasQueryOptions Quick() {
  RasQueryOptions o;
  o.connect_sec = 2;
  o.handshake_sec = 0.3;
  o.answer_sec = 0.5;
  return o;
}

const char kJsonBody[] = "{\n  \"communicators\": []\n}\n";
const char kTextBody[] = "NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8\n";

TEST(RasClientTest, AsksJsonWhereTheServerTakesIt) {
  FakeRasServer s(FakeRasServer::kJson, kTextBody, kJsonBody);
  const RasAnswer a = QueryRas(s.address(), Quick());
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_TRUE(a.json);
  EXPECT_EQ(a.body, kJsonBody);
  EXPECT_EQ(a.address, s.address());
  EXPECT_EQ(s.heard(), std::vector<std::string>({"CLIENT PROTOCOL 2", "TIMEOUT 3", "SET FORMAT json", "STATUS"}));
}

TEST(RasClientTest, FallsBackToTextWhereSetFormatIsRefused) {
  FakeRasServer s(FakeRasServer::kTextOnly, kTextBody);
  const RasAnswer a = QueryRas(s.address(), Quick());
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_FALSE(a.json);
  EXPECT_EQ(a.body, kTextBody);
  EXPECT_EQ(a.format_note,
            "SET FORMAT json refused (NCCL before 2.28.7): ERROR: Unknown command SET FORMAT json");
  EXPECT_EQ(s.heard(),
            std::vector<std::string>({"CLIENT PROTOCOL 2", "TIMEOUT 3", "SET FORMAT json", "VERBOSE STATUS"}));
}

TEST(RasClientTest, TextWhenAskedForText) {
  FakeRasServer s(FakeRasServer::kJson, kTextBody, kJsonBody);
  RasQueryOptions o = Quick();
  o.prefer_json = false;
  o.ras_timeout_sec = 7;
  const RasAnswer a = QueryRas(s.address(), o);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_FALSE(a.json);
  EXPECT_EQ(s.heard(), std::vector<std::string>({"CLIENT PROTOCOL 2", "TIMEOUT 7", "VERBOSE STATUS"}));
}

TEST(RasClientTest, AServerThatNeverAnswersCostsItsDeadline) {
  FakeRasServer s(FakeRasServer::kSilent, "");
  const RasAnswer a = QueryRas(s.address(), Quick());
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error, "RAS at " + s.address() + ": no answer within 0.3 s (after CLIENT PROTOCOL 2)");
  EXPECT_EQ(s.connections(), 1);
}

TEST(RasClientTest, AReportThatNeverEndsCostsItsDeadline) {
  FakeRasServer s(FakeRasServer::kStallsBody, "", std::string(1000, 'x'));
  const RasAnswer a = QueryRas(s.address(), Quick());
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error, "RAS at " + s.address() + ": answer not complete within 0.5 s (500 bytes read) (after STATUS)");
  EXPECT_TRUE(a.body.empty());
}

TEST(RasClientTest, NotRas) {
  FakeRasServer s(FakeRasServer::kGarbage, "");
  const RasAnswer a = QueryRas(s.address(), Quick());
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.error, "RAS at " + s.address() + ": not NCCL's RAS: it answered 'HTTP/1.1 400 Bad Request' to CLIENT PROTOCOL");
}

TEST(RasClientTest, ConnectionRefused) {
  // A port just bound and released: nothing listens there.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const RasAnswer r = QueryRas(address, Quick());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "RAS not reachable at " + address + ": Connection refused");
}

TEST(RasClientTest, Addresses) {
  std::string host, error;
  int port = 0;
  ASSERT_TRUE(ParseRasAddress("10.0.0.7:28029", &host, &port, &error)) << error;
  EXPECT_EQ(host, "10.0.0.7");
  EXPECT_EQ(port, 28029);
  ASSERT_TRUE(ParseRasAddress("[::1]:5", &host, &port, &error)) << error;
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 5);
  ASSERT_TRUE(ParseRasAddress("localhost", &host, &port, &error)) << error;
  EXPECT_EQ(port, 28028);
  ASSERT_TRUE(ParseRasAddress(":7000", &host, &port, &error)) << error;
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 7000);
  EXPECT_FALSE(ParseRasAddress("node7.example:28028", &host, &port, &error));
  EXPECT_EQ(error, "RAS address 'node7.example:28028': give a numeric IP address (or localhost); names are not resolved");
  EXPECT_FALSE(ParseRasAddress("1.2.3.4:99999", &host, &port, &error));
  EXPECT_EQ(error, "RAS address '1.2.3.4:99999': the port must be a number from 1 to 65535");
  EXPECT_FALSE(ParseRasAddress("[::1", &host, &port, &error));
  EXPECT_EQ(error, "RAS address '[::1': an IPv6 address needs its closing ']'");
  const RasAnswer r = QueryRas("nowhere:1");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "RAS address 'nowhere:1': give a numeric IP address (or localhost); names are not resolved");
}

}  // namespace
}  // namespace ncclwatch::tools
