// Package opsmcp runs the mutating tools of an MCP server (the official Go
// SDK, github.com/modelcontextprotocol/go-sdk) through ops, so that an
// agent runtime that retries a tool call after a lost response gets the
// first call's answer instead of a second effect.
//
// The operation's identity is the execution boundary's, never the model's:
// the key comes from the request's _meta, which the orchestrator sets from
// its durable run and step state ([KeyMeta], or [SEPKeyMeta] where a client
// sends that), and the tenant from [Config.Tenant], which reads the
// session's authentication. The intent is the tool's typed input, validated
// by the SDK against the tool's input schema (which must refuse unknown
// properties), then canonicalized and fingerprinted by ops like any other.
//
// Local effects run in the record's transaction ([AddLocalTool], over
// [ops.DoTx]); external ones commit a reservation first and call the
// provider with [ops.Attempt.ProviderKey] ([AddExternalTool], over
// [ops.DoExternal]). Every answer the library gives instead of the tool's
// result is a tool error (IsError) whose structured content is a
// [ToolError]: its class and whether a retry with the same key is safe, so
// the model sees it and can act; none is a JSON-RPC error.
package opsmcp
