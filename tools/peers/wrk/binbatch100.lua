-- POST 100 x 1 KiB messages as one binary batch (application/vnd.mqgate.batch).
local function u32(n) return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256) end
local body = string.rep("x", 1024)
local parts = { u32(100) }
for i = 1, 100 do parts[#parts + 1] = u32(#body) .. body end
wrk.method = "POST"
wrk.body = table.concat(parts)
wrk.headers["Content-Type"] = "application/vnd.mqgate.batch"
