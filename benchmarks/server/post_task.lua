-- wrk script: POST /v1/tasks with a 100-byte payload over keep-alive
-- connections (benchmarks/server/server_bench.sh). The token comes from
-- the SPOOLD_TOKEN environment variable.
local token = os.getenv("SPOOLD_TOKEN")
local payload = string.rep("x", 100)
wrk.method = "POST"
wrk.path = "/v1/tasks"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.body = '{"type":"noop","payload":"' .. payload .. '"}'

