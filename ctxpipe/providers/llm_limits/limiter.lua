-- The cluster-wide LLM limiter of one provider scope (base URL + API key hash), in one atomic
-- script. Times are Redis server milliseconds (TIME), so every machine counts on one clock.
--
-- A request counts in the window from the moment it is granted until `window` after its call
-- ended (it reached the server at some moment in between): while in flight its entry in the
-- request log is dated `now + lease`, and `release` dates it to the end of the call. So the
-- server never sees more than the limit in any window, however long the requests take to
-- arrive. Tokens are dated when granted (a reservation, corrected by `release`).
--
-- KEYS: 1 request log (zset id -> ms), 2 token log (zset id -> ms), 3 token costs (hash
--       id -> tokens), 4 token total (string), 5 in flight (zset id -> lease end ms),
--       6 cool-down end (string ms)
-- ARGV: 1 op (acquire | release | cooldown | snapshot), 2 window ms, 3 lease ms, then per op:
--   acquire  4 id, 5 tokens, 6 request limit, 7 token limit, 8 concurrency cap (0: none)
--                                  -> {1, 0, ''} granted | {0, wait ms, reason}
--   release  4 id, 5 tokens used (-1: keep the reservation) -> 1
--   cooldown 4 ms                  -> the cool-down's end (ms)
--   snapshot                       -> {requests, tokens, in flight, cool-down ms left}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
local window = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local cutoff = now - window

local function expire_tokens()
  local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  if #old == 0 then return end
  local freed = 0
  for _, id in ipairs(old) do
    freed = freed + tonumber(redis.call('HGET', KEYS[3], id) or '0')
    redis.call('HDEL', KEYS[3], id)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  redis.call('DECRBY', KEYS[4], freed)
end

local function keep()
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], window + lease + 1000) end
end

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cutoff)
expire_tokens()
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local total = tonumber(redis.call('GET', KEYS[4]) or '0')

if op == 'snapshot' then
  local cool = tonumber(redis.call('GET', KEYS[6]) or '0') - now
  if cool < 0 then cool = 0 end
  return {redis.call('ZCARD', KEYS[1]), total, redis.call('ZCARD', KEYS[5]), cool}
end

if op == 'cooldown' then
  local till = now + tonumber(ARGV[4])
  local cur = tonumber(redis.call('GET', KEYS[6]) or '0')
  if till > cur then
    redis.call('SET', KEYS[6], till, 'PX', tonumber(ARGV[4]) + 1000)
    return till
  end
  return cur
end

if op == 'release' then
  local id = ARGV[4]
  local used = tonumber(ARGV[5])
  redis.call('ZREM', KEYS[5], id)
  redis.call('ZADD', KEYS[1], 'XX', now, id)
  if used >= 0 then
    local held = redis.call('HGET', KEYS[3], id)
    if held then
      redis.call('HSET', KEYS[3], id, used)
      redis.call('INCRBY', KEYS[4], used - tonumber(held))
    elseif used > 0 then -- the reservation left the window already: charge the use now
      redis.call('ZADD', KEYS[2], now, id .. ':late')
      redis.call('HSET', KEYS[3], id .. ':late', used)
      redis.call('INCRBY', KEYS[4], used)
    end
  end
  keep()
  return 1
end

-- acquire
local id = ARGV[4]
local tokens = tonumber(ARGV[5])
local req_limit = tonumber(ARGV[6])
local tok_limit = tonumber(ARGV[7])
local cap = tonumber(ARGV[8])

local cool = tonumber(redis.call('GET', KEYS[6]) or '0')
if cool > now then
  return {0, cool - now, 'retry-after'}
end
if cap > 0 and redis.call('ZCARD', KEYS[5]) >= cap then
  return {0, 0, 'concurrency'}
end
if req_limit > 0 then
  local n = redis.call('ZCARD', KEYS[1])
  if n >= req_limit then
    local first = redis.call('ZRANGE', KEYS[1], n - req_limit, n - req_limit, 'WITHSCORES')
    local ended = tonumber(first[2])
    if ended > now then -- still in flight: it counts for a whole window after it ends
      return {0, window, 'requests'}
    end
    return {0, ended + window - now + 1, 'requests'}
  end
end
if tok_limit > 0 and total > 0 and total + tokens > tok_limit then
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local left = total
  local wait = window
  for i = 1, #entries, 2 do
    left = left - tonumber(redis.call('HGET', KEYS[3], entries[i]) or '0')
    if left <= 0 or left + tokens <= tok_limit then
      wait = tonumber(entries[i + 1]) + window - now + 1
      break
    end
  end
  return {0, wait, 'tokens'}
end
redis.call('ZADD', KEYS[1], now + lease, id)
redis.call('ZADD', KEYS[2], now, id)
redis.call('HSET', KEYS[3], id, tokens)
redis.call('INCRBY', KEYS[4], tokens)
keep()
if cap > 0 then
  redis.call('ZADD', KEYS[5], now + lease, id)
  redis.call('PEXPIRE', KEYS[5], lease + 1000)
end
return {1, 0, ''}
