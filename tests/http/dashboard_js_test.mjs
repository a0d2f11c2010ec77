// The dashboard's scripts that do not touch the page, under node's test runner: the Prometheus
// text parser (prometheus.js) and what the dashboard computes from two polls (model.js).
// Run: node --test tests/http/dashboard_js_test.mjs (SLUICE_DASHBOARD_DIR: the scripts' folder).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

// The scripts are ES modules served to a browser; node reads them as such from a copy in a folder
// whose package.json says so.
const source =
  process.env.SLUICE_DASHBOARD_DIR ??
  fileURLToPath(new URL('../../src/http/dashboard/', import.meta.url));
const copy = mkdtempSync(join(tmpdir(), 'sluice-dashboard-'));
cpSync(source, copy, { recursive: true });
writeFileSync(join(copy, 'package.json'), '{"type":"module"}');
after(() => rmSync(copy, { recursive: true, force: true }));
const { parsePrometheus, parseValue, select } = await import(
  pathToFileURL(join(copy, 'prometheus.js'))
);
const { snapshot, summarize, visibleKey } = await import(pathToFileURL(join(copy, 'model.js')));

describe('parsePrometheus', () => {
  test('reads HELP and TYPE, skips other comments and blank lines, accepts CRLF', () => {
    const parsed = parsePrometheus(
      '# HELP a_total Counts \\\\ things\\nacross lines.\r\n' +
        '# TYPE a_total counter\r\n' +
        '#  a comment that is neither\n' +
        '#HELP not_help because no blank after #\n' +
        '\n' +
        '   \n' +
        'a_total 3\r\n',
    );
    assert.equal(parsed.help.a_total, 'Counts \\ things\nacross lines.');
    assert.equal(parsed.types.a_total, 'counter');
    assert.deepEqual(parsed.samples, [{ name: 'a_total', labels: {}, value: 3 }]);
  });

  test('unescapes label values: quotes, backslashes, newlines, and keeps , } = inside', () => {
    const parsed = parsePrometheus(
      'm{node="a\\"b",path="C:\\\\dir\\\\",text="line1\\nline2", odd = "x,}={" ,} 1\n',
    );
    assert.deepEqual(parsed.samples[0].labels, {
      node: 'a"b',
      path: 'C:\\dir\\',
      text: 'line1\nline2',
      odd: 'x,}={',
    });
  });

  test('reads NaN, infinities, exponents, signs and timestamps', () => {
    const parsed = parsePrometheus(
      [
        'a NaN',
        'b +Inf',
        'c -Inf',
        'd 1.5e3',
        'e -0.25',
        'f .5',
        'g 7 1700000000000',
        'h{le="+Inf"} 12',
        'i inf',
      ].join('\n'),
    );
    const values = Object.fromEntries(parsed.samples.map((s) => [s.name, s.value]));
    assert.ok(Number.isNaN(values.a));
    assert.equal(values.b, Infinity);
    assert.equal(values.c, -Infinity);
    assert.equal(values.d, 1500);
    assert.equal(values.e, -0.25);
    assert.equal(values.f, 0.5);
    assert.equal(values.g, 7);
    assert.equal(parsed.samples[6].timestamp, 1700000000000);
    assert.equal(parsed.samples[7].labels.le, '+Inf');
    assert.equal(values.i, Infinity);
  });

  test('refuses lines that do not follow the format, naming the line', () => {
    for (const [text, message] of [
      ['ok 1\nm{a="x} 1', /line 2: unterminated value of label a/],
      ['m{a="\\t"} 1', /bad escape/],
      ['m{a=x} 1', /expected '"'/],
      ['m{a="1" b="2"} 1', /expected ',' or '}'/],
      ['m{a="1",a="2"} 1', /label a given twice/],
      ['m{1a="x"} 1', /expected a label name/],
      ['m', /expected a value/],
      ['m 1 2 3', /expected a value/],
      ['m one', /not a number: 'one'/],
      ['m 0x10', /not a number/],
      ['9m 1', /expected a metric name/],
    ]) {
      assert.throws(() => parsePrometheus(text), message, text);
    }
    assert.throws(() => parseValue(''), /not a number/);
  });

  test('select matches by name and a subset of labels', () => {
    const parsed = parsePrometheus(
      'x{rule="a",result="allowed"} 1\nx{rule="a",result="denied"} 2\nx{rule="b",result="denied"} 4\ny 8',
    );
    assert.deepEqual(
      select(parsed, 'x', { result: 'denied' }).map((s) => s.value),
      [2, 4],
    );
    assert.equal(select(parsed, 'x').length, 3);
    assert.equal(select(parsed, 'z').length, 0);
  });
});

// An exposition of sluice's metrics for two rules, as Metrics::Exposition writes them.
function exposition({ allowed, denied, waiters = 0, source = {}, nodes = {}, shadow = null }) {
  const lines = ['# TYPE sluice_checks_total counter'];
  for (const rule of ['api', 'login']) {
    lines.push(`sluice_checks_total{rule="${rule}",result="allowed"} ${allowed[rule]}`);
    lines.push(`sluice_checks_total{rule="${rule}",result="denied"} ${denied[rule]}`);
  }
  for (const name of ['store', 'hot_key_cache', 'fail_open', 'fail_closed', 'local_fallback']) {
    lines.push(`sluice_decisions_total{rule="api",source="${name}"} ${source[name] ?? 0}`);
    lines.push(`sluice_decisions_total{rule="login",source="${name}"} 0`);
  }
  lines.push(`sluice_acquire_waiters{rule="api"} ${waiters}`, 'sluice_acquire_waiters{rule="login"} 0');
  lines.push('sluice_store_errors_total 5');
  lines.push('sluice_check_duration_seconds_bucket{le="+Inf"} 9');
  if (Object.keys(nodes).length) {
    lines.push('sluice_breaker_state{state="closed"} 0', 'sluice_breaker_state{state="open"} 1');
    lines.push('sluice_breaker_state{state="half_open"} 0', 'sluice_breaker_opens_total 2');
    for (const [name, state] of Object.entries(nodes)) {
      const node = name.replaceAll('\\', '\\\\').replaceAll('"', '\\"');
      for (const s of ['closed', 'open', 'half_open']) {
        lines.push(`sluice_node_breaker_state{node="${node}",state="${s}"} ${s === state ? 1 : 0}`);
      }
      lines.push(`sluice_node_breaker_opens_total{node="${node}"} 1`);
    }
  }
  if (shadow) lines.push(`sluice_shadow_checks_total{rule="api",result="denied"} ${shadow}`);
  return lines.join('\n') + '\n';
}

describe('summarize', () => {
  const first = snapshot(
    exposition({ allowed: { api: 10, login: 1 }, denied: { api: 5, login: 0 } }),
    1000,
    1010,
  );

  test('shows totals and no rates after one poll', () => {
    const summary = summarize(first, null);
    assert.deepEqual(
      summary.rules.map((r) => r.rule),
      ['api', 'login'],
    );
    const api = summary.rules[0];
    assert.equal(api.allowed.total, 10);
    assert.equal(api.denied.total, 5);
    assert.equal(api.decisions.total, 15);
    assert.equal(api.allowed.rate, null);
    assert.equal(summary.breaker, null);
    assert.deepEqual(summary.nodes, []);
    assert.equal(summary.hasShadow, false);
    assert.equal(api.shadowDenied, null);
    assert.equal(summary.storeErrors.total, 5);
  });

  test('rates are the increase between the polls over the time between their midpoints', () => {
    const second = snapshot(
      exposition({
        allowed: { api: 30, login: 1 },
        denied: { api: 15, login: 0 },
        waiters: 3,
        source: { store: 40, fail_open: 5 },
      }),
      2995,
      3025,
    );
    const summary = summarize(second, first);
    assert.equal(summary.intervalMs, 2005);
    const api = summary.rules[0];
    assert.equal(api.allowed.delta, 20);
    assert.equal(api.denied.delta, 10);
    assert.equal(api.decisions.delta, 30);
    assert.ok(Math.abs(api.decisions.rate - 30 / 2.005) < 1e-9);
    assert.equal(api.waiters, 3);
    assert.equal(api.degraded, 5);
    assert.equal(summary.rules[1].decisions.delta, 0);
    const failOpen = summary.sources.find((s) => s.source === 'fail_open');
    assert.equal(failOpen.degraded, true);
    assert.equal(failOpen.total, 5);
    assert.equal(summary.sources.find((s) => s.source === 'store').degraded, false);
    assert.deepEqual(
      summary.sources.map((s) => s.source),
      ['store', 'hot_key_cache', 'fail_open', 'fail_closed', 'local_fallback'],
    );
  });

  test('a counter that went down was reset: its increase is its value', () => {
    const restarted = snapshot(
      exposition({ allowed: { api: 2, login: 0 }, denied: { api: 1, login: 0 } }),
      2000,
      2000,
    );
    const api = summarize(restarted, first).rules[0];
    assert.equal(api.allowed.delta, 2);
    assert.equal(api.denied.delta, 1);
  });

  test('reads the breakers and, when it is exported, the shadow verdicts', () => {
    const withStore = snapshot(
      exposition({
        allowed: { api: 10, login: 1 },
        denied: { api: 5, login: 0 },
        nodes: { '127.0.0.1:7000': 'open', 'odd "node"': 'half_open' },
        shadow: 4,
      }),
      2000,
      2000,
    );
    const summary = summarize(withStore, first);
    assert.deepEqual(summary.breaker, { state: 'open', opens: 2 });
    assert.deepEqual(summary.nodes, [
      { node: '127.0.0.1:7000', state: 'open', opens: 1 },
      { node: 'odd "node"', state: 'half_open', opens: 1 },
    ]);
    assert.equal(summary.hasShadow, true);
    assert.equal(summary.rules[0].shadowDenied.total, 4);
  });
});

test('visibleKey shows control and invisible characters as escapes', () => {
  assert.equal(visibleKey('user:42'), 'user:42');
  assert.equal(visibleKey(''), '(empty key)');
  assert.equal(visibleKey('a\u202eb'), 'a\\u{202e}b');
  assert.equal(visibleKey('x\ny\u0000\u200b'), 'x\\u{000a}y\\u{0000}\\u{200b}');
  assert.equal(visibleKey('<b>café 😀</b>'), '<b>café 😀</b>');
});
