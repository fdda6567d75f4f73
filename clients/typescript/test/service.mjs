// Where the running `callwarden serve` is, as tests/serve/test_typescript_client.py (which
// starts it) says in the environment; the policy is tests/serve/test_serve.py's POLICY.
const { CALLWARDEN_URL: url, CALLWARDEN_AGENT_TOKEN: agentToken,
  CALLWARDEN_APPROVER_TOKEN: approverToken } = process.env;
if (!url || !agentToken || !approverToken) {
  throw new Error("set CALLWARDEN_URL, CALLWARDEN_AGENT_TOKEN and CALLWARDEN_APPROVER_TOKEN " +
    "(tests/serve/test_typescript_client.py does)");
}
/** A GitHub token the policy's output rule redacts. */
const SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

export { agentToken, approverToken, SECRET, url };
