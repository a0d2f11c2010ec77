// A parser of the Prometheus text exposition format, version 0.0.4: what GET /metrics answers.
//
//   # HELP name Text, with \\ and \n escaped
//   # TYPE name counter|gauge|histogram|summary|untyped
//   name{label="value, with \\, \" and \n escaped",other="x",} 12.5 [timestamp]
//
// Other comments and blank lines are skipped. A value is a float as Go writes it: NaN, +Inf, -Inf
// (any case) included. A line that does not follow the format throws an Error naming the line.

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const FLOAT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

// A sample value or timestamp: a float, or NaN and ±Inf as Go's ParseFloat reads them.
export function parseValue(text) {
  const lower = text.toLowerCase();
  if (lower === 'nan') return NaN;
  if (['inf', '+inf', 'infinity', '+infinity'].includes(lower)) return Infinity;
  if (['-inf', '-infinity'].includes(lower)) return -Infinity;
  if (!FLOAT.test(text)) throw new Error(`not a number: '${text}'`);
  return Number(text);
}

function unescapeHelp(text) {
  return text.replace(/\\(\\|n)/g, (_, c) => (c === 'n' ? '\n' : '\\'));
}

// Reads a label set starting after '{'; returns the labels and the position after '}'.
function parseLabels(line, start) {
  const labels = {};
  let i = start;
  const skipBlanks = () => {
    while (line[i] === ' ' || line[i] === '\t') i++;
  };
  for (;;) {
    skipBlanks();
    if (line[i] === '}') return { labels, end: i + 1 };
    const name = LABEL_NAME.exec(line.slice(i));
    if (!name) throw new Error(`expected a label name at column ${i + 1}`);
    i += name[0].length;
    skipBlanks();
    if (line[i] !== '=') throw new Error(`expected '=' after label ${name[0]}`);
    i++;
    skipBlanks();
    if (line[i] !== '"') throw new Error(`expected '"' to open the value of label ${name[0]}`);
    i++;
    let value = '';
    for (;;) {
      if (i >= line.length) throw new Error(`unterminated value of label ${name[0]}`);
      const c = line[i++];
      if (c === '"') break;
      if (c !== '\\') {
        value += c;
        continue;
      }
      const escaped = line[i++];
      if (escaped === 'n') value += '\n';
      else if (escaped === '\\' || escaped === '"') value += escaped;
      else throw new Error(`bad escape '\\${escaped ?? ''}' in label ${name[0]}`);
    }
    if (Object.hasOwn(labels, name[0])) throw new Error(`label ${name[0]} given twice`);
    labels[name[0]] = value;
    skipBlanks();
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`expected ',' or '}' after label ${name[0]}`);
  }
}

function parseSample(line) {
  const name = METRIC_NAME.exec(line);
  if (!name) throw new Error('expected a metric name');
  let i = name[0].length;
  let labels = {};
  if (line[i] === '{') {
    const parsed = parseLabels(line, i + 1);
    labels = parsed.labels;
    i = parsed.end;
  }
  const fields = line.slice(i).trim().split(/[ \t]+/);
  if (fields.length < 1 || fields[0] === '' || fields.length > 2) {
    throw new Error('expected a value and an optional timestamp');
  }
  const sample = { name: name[0], labels, value: parseValue(fields[0]) };
  if (fields.length === 2) sample.timestamp = parseValue(fields[1]);
  return sample;
}

// Returns { samples: [{name, labels, value, timestamp?}], help: {name: text}, types: {name: type} }.
export function parsePrometheus(text) {
  const result = { samples: [], help: {}, types: {} };
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const trimmed = line.trim();
    try {
      if (trimmed === '') return;
      if (trimmed.startsWith('#')) {
        const comment = /^#[ \t]+(HELP|TYPE)[ \t]+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:[ \t]+(.*))?$/.exec(
          trimmed,
        );
        if (!comment) return;  // a plain comment
        const [, keyword, name, rest = ''] = comment;
        if (keyword === 'HELP') result.help[name] = unescapeHelp(rest);
        else result.types[name] = rest.trim();
        return;
      }
      result.samples.push(parseSample(trimmed));
    } catch (error) {
      throw new Error(`/metrics line ${index + 1}: ${error.message}`);
    }
  });
  return result;
}

// The samples named `name` whose labels include every one of `labels`.
export function select(parsed, name, labels = {}) {
  return parsed.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}
