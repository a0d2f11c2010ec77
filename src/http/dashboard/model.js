// What the dashboard shows, computed from two successive polls of GET /metrics: totals from the
// latest poll, and per-second rates from the counters' increase between the two; and how it
// shows a key. No access to the page: node's test runner runs it too.
import { parsePrometheus, select } from './prometheus.js';

// The shadow mode (rules that report what they would deny, and deny nothing) is expected to count
// its verdicts in this counter, by rule and result; while /metrics has no such samples the
// dashboard shows no shadow column.
export const SHADOW_CHECKS = 'sluice_shadow_checks_total';
export const DEGRADED_SOURCES = ['fail_open', 'fail_closed', 'local_fallback'];
// The paths that decide, as the dashboard lists them: the store's own first.
const SOURCE_ORDER = ['store', 'hot_key_cache', ...DEGRADED_SOURCES];

// One poll: the parsed exposition and when it was asked for and received (ms since the epoch).
export function snapshot(text, pollStart, pollEnd) {
  return { metrics: parsePrometheus(text), pollStart, pollEnd, at: (pollStart + pollEnd) / 2 };
}

function sum(samples) {
  return samples.reduce((total, s) => total + s.value, 0);
}

// A counter's total now, its increase since the previous poll (a counter that went down was
// reset: the service restarted, and it counts from 0 again) and that increase per second.
function counter(current, previous, intervalMs, name, labels) {
  const total = sum(select(current.metrics, name, labels));
  if (!previous || intervalMs <= 0) return { total, delta: null, rate: null };
  const before = sum(select(previous.metrics, name, labels));
  const delta = total >= before ? total - before : total;
  return { total, delta, rate: (delta * 1000) / intervalMs };
}

function labelValues(metrics, name, label) {
  const values = new Set();
  for (const s of select(metrics, name)) {
    if (s.labels[label] !== undefined) values.add(s.labels[label]);
  }
  return [...values].sort();
}

// The state whose gauge is 1 among the samples (closed, open or half_open), or null.
function stateOf(samples) {
  const on = samples.find((s) => s.value === 1);
  return on ? on.labels.state : null;
}

export function summarize(current, previous) {
  const intervalMs = previous ? current.at - previous.at : 0;
  const count = (name, labels) => counter(current, previous, intervalMs, name, labels);
  const hasShadow = select(current.metrics, SHADOW_CHECKS).length > 0;

  const rules = labelValues(current.metrics, 'sluice_checks_total', 'rule').map((rule) => {
    const allowed = count('sluice_checks_total', { rule, result: 'allowed' });
    const denied = count('sluice_checks_total', { rule, result: 'denied' });
    return {
      rule,
      allowed,
      denied,
      decisions: count('sluice_checks_total', { rule }),
      shadowDenied: hasShadow ? count(SHADOW_CHECKS, { rule, result: 'denied' }) : null,
      degraded: DEGRADED_SOURCES.reduce(
        (total, source) => total + count('sluice_decisions_total', { rule, source }).total,
        0,
      ),
      waiters: sum(select(current.metrics, 'sluice_acquire_waiters', { rule })),
    };
  });

  const rank = (source) => {
    const i = SOURCE_ORDER.indexOf(source);
    return i < 0 ? SOURCE_ORDER.length : i;
  };
  const sources = labelValues(current.metrics, 'sluice_decisions_total', 'source')
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map(
    (source) => ({
      source,
      degraded: DEGRADED_SOURCES.includes(source),
      ...count('sluice_decisions_total', { source }),
    }),
  );

  const breakerSamples = select(current.metrics, 'sluice_breaker_state');
  const breaker = breakerSamples.length
    ? { state: stateOf(breakerSamples), opens: count('sluice_breaker_opens_total').total }
    : null;
  const nodes = labelValues(current.metrics, 'sluice_node_breaker_state', 'node').map((node) => ({
    node,
    state: stateOf(select(current.metrics, 'sluice_node_breaker_state', { node })),
    opens: count('sluice_node_breaker_opens_total', { node }).total,
  }));

  return {
    intervalMs,
    hasShadow,
    rules,
    sources,
    breaker,
    nodes,
    storeErrors: count('sluice_store_errors_total'),
  };
}

// A key as text a person can read: control and invisible formatting characters (bidi
// overrides, zero-width spaces, line separators) shown as \u{...} instead of acting.
export function visibleKey(key) {
  if (key === '') return '(empty key)';
  return key.replace(
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu,
    (c) => `\\u{${c.codePointAt(0).toString(16).padStart(4, '0')}}`,
  );
}
