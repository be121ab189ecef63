-- Whether ref holds one lock (with the token, where not 0): one read.
--
-- $1 name, $2 token (0: any), $3 ref.
SELECT h.token IS NOT NULL, {{schema}}.micros(c.t), {{schema}}.micros(h.renewed), {{schema}}.micros(h.expires)
  FROM (SELECT clock_timestamp() AS t) c
  LEFT JOIN {{schema}}.holders h
    ON h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint)
