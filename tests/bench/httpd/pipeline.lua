-- pipeline.lua -- wrk script: every write carries 16 GETs of the URL's
-- path (HTTP/1.1 pipelining). wrk counts each response as one request;
-- it times each batch (written to its last response), and its printed
-- percentiles are not those batches' (run_httpd_bench.py,
-- wrk_latency_valid): the benchmark reports none for these rows.
--
--   wrk -t1 -c64 -d3 --latency -s pipeline.lua http://127.0.0.1:PORT/plaintext
--
-- The batch is built at load time, not in init(): wrk calls request() once
-- in its main Lua state (where init() never runs) to count the requests per
-- write, and every thread must then send exactly that many. wrk sets
-- wrk.path from the URL before it loads the script.

local DEPTH = 16
-- wrk has not filled in its own Host header yet when this runs: name one.
local batch = string.rep(wrk.format("GET", wrk.path, { Host = "localhost" }), DEPTH)

function request()
  return batch
end
