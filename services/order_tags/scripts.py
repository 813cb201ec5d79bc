"""The Lua scripts of the tag store (services.order_tags.storage): each a command Redis runs
atomically, so a write and what it publishes, or a read and the tag it makes, are one step."""

from __future__ import annotations

# One command, so atomic on a single Redis and on a cluster alike (the key is one slot).
# KEYS[1]: the order's hash; ARGV: ttl, only_if_absent (0/1), publish (0/1), owner, the most
# parts an order may have, then part, content pairs. A write that would take the order past
# that many parts writes nothing: its answer is the error `too_many_parts <stored> <new>`.
# A create (only_if_absent) that makes an order's tags from nothing notes when (`_made`): a
# client's tag older than that was issued before they were lost and made again. A feature's
# write that changes a part takes the note away: what differs then is a change, not a loss. A
# create that adds parts to an order that has some leaves the note as it is: after a loss, the
# parts a feature wrote since then changed, and a note made now would pass them for lost.
# The parts whose content really changed are published on the order's channel
# (its key's name, so SPUBLISH stays on the key's shard): a waiting poll wakes for a change,
# not for a write that changed nothing (a missing tag created twice, the same tag set again).
SET_TAGS_SCRIPT = """
local CREATED_FIELD = "_created"
local OWNER_FIELD = "_owner"
local MADE_FIELD = "_made"
local only_if_absent = ARGV[2] == "1"
local new_parts = 0
for i = 6, #ARGV, 2 do
  if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 0 then
    new_parts = new_parts + 1
  end
end
if new_parts > 0 then
  local stored = redis.call("HLEN", KEYS[1]) - redis.call("HEXISTS", KEYS[1], CREATED_FIELD)
    - redis.call("HEXISTS", KEYS[1], OWNER_FIELD) - redis.call("HEXISTS", KEYS[1], MADE_FIELD)
  if stored + new_parts > tonumber(ARGV[5]) then
    return redis.error_reply("too_many_parts " .. stored .. " " .. new_parts)
  end
end
local had_parts = redis.call("HLEN", KEYS[1]) - redis.call("HEXISTS", KEYS[1], CREATED_FIELD)
  - redis.call("HEXISTS", KEYS[1], OWNER_FIELD) - redis.call("HEXISTS", KEYS[1], MADE_FIELD) > 0
local changed = {}
for i = 6, #ARGV, 2 do
  local old = redis.call("HGET", KEYS[1], ARGV[i])
  if old ~= ARGV[i + 1] and not (only_if_absent and old) then
    redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
    changed[#changed + 1] = ARGV[i]
  end
end
if #changed > 0 then
  -- when the order's first tag was written: a just-created order its source does not list
  -- yet is kept (stale) for a grace after it
  local now = redis.call("TIME")
  local now_ms = tostring(now[1] * 1000 + math.floor(now[2] / 1000))
  redis.call("HSETNX", KEYS[1], CREATED_FIELD, now_ms)
  if only_if_absent then
    if not had_parts then
      redis.call("HSET", KEYS[1], MADE_FIELD, now_ms)
    end
  else
    redis.call("HDEL", KEYS[1], MADE_FIELD)
  end
end
-- the first writer that says whose order it is names it, also where it writes no part: tags
-- a feature's bump made again (after a flush) are given their owner by the next poll
if ARGV[4] ~= "" and redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("HSETNX", KEYS[1], OWNER_FIELD, ARGV[4])
end
redis.call("EXPIRE", KEYS[1], ARGV[1])
if ARGV[3] == "1" and #changed > 0 then
  redis.call("SPUBLISH", KEYS[1], table.concat(changed, ","))
end
return redis.call("HGETALL", KEYS[1])
"""

# KEYS[1]: the order's hash; ARGV[1]: publish (0/1). "*": every part of the order is gone.
DELETE_TAGS_SCRIPT = """
local deleted = redis.call("DEL", KEYS[1])
if ARGV[1] == "1" and deleted > 0 then
  redis.call("SPUBLISH", KEYS[1], "*")
end
return deleted
"""


# KEYS[1]: a user's list tag, KEYS[2]: its kept answer (one hash tag: one shard); ARGV: a new
# tag, ttl. The list's tag (this one if it had none) and its kept answer: one command where
# SET NX GET and GET were two (most of a read's cost is the client's per command)
READ_LIST_SCRIPT = """
local tag = redis.call("SET", KEYS[1], ARGV[1], "NX", "GET", "EX", ARGV[2])
return {tag or ARGV[1], redis.call("GET", KEYS[2])}
"""


# KEYS[1]: a user's list tag; ARGV: the new tag, ttl, publish (0/1). Published on the list's
# channel (its key's name: sharded like the key).
BUMP_LIST_SCRIPT = """
redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[2])
if ARGV[3] == "1" then
  redis.call("SPUBLISH", KEYS[1], "list")
end
return 1
"""

# KEYS[1]: an order's hash, KEYS[2]: a user's force count of it (one hash tag: one slot);
# ARGV: the user, the force window. The count only when the order is the user's (its hash
# names them its owner), checked in the same step: a force on an order that does not exist,
# or is another's, writes nothing. 0: not the user's order, nothing counted.
FORCE_SCRIPT = """
if redis.call("HGET", KEYS[1], "_owner") ~= ARGV[1] then
  return 0
end
local count = redis.call("INCR", KEYS[2])
redis.call("EXPIRE", KEYS[2], ARGV[2], "NX")
return count
"""

# A whole read in one command, on a single Redis (on a cluster its keys are in many slots: a
# pipeline of the commands above, one round trip per shard). KEYS: the orders' hashes, each
# forced order's hash and count (a pair each), then each list's tag and kept answer; ARGV:
# how many orders and forced orders, the force window, the lists' ttl, the user of each forced
# order, then a new tag per list. Answers the orders' hashes (flat), the forced orders' counts
# (0: not the user's order, nothing counted: as FORCE_SCRIPT), and each list's tag and kept
# answer. The client's cost is per command, not per key: one command where a read of a
# superapp poll took four.
READ_ALL_SCRIPT = """
local orders = tonumber(ARGV[1])
local forced = tonumber(ARGV[2])
local hashes, counts, lists = {}, {}, {}
for i = 1, orders do
  hashes[i] = redis.call("HGETALL", KEYS[i])
end
for i = 1, forced do
  local order_key, count_key = KEYS[orders + 2 * i - 1], KEYS[orders + 2 * i]
  if redis.call("HGET", order_key, "_owner") == ARGV[4 + i] then
    counts[i] = redis.call("INCR", count_key)
    redis.call("EXPIRE", count_key, ARGV[3], "NX")
  else
    counts[i] = 0
  end
end
local first = orders + 2 * forced
for i = 1, (#KEYS - first) / 2 do
  local tag_key, kept_key = KEYS[first + 2 * i - 1], KEYS[first + 2 * i]
  local new_tag = ARGV[4 + forced + i]
  local tag = redis.call("SET", tag_key, new_tag, "NX", "GET", "EX", ARGV[4])
  lists[i] = {tag or new_tag, redis.call("GET", kept_key)}
end
return {hashes, counts, lists}
"""
