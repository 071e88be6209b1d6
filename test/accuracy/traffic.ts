// Seeded, deterministic traffic generators for the accuracy suite: steady, Poisson, bursts, window-edge and adversarial patterns.

/** One request: its time in ms relative to the start of the run (an aligned window boundary) and its cost. */
export interface Request {
  t: number;
  cost: number;
}

/** The shape of a run: the policy's limit and window, how many windows to cover, and the seed. */
export interface TrafficOptions {
  limit: number;
  windowMs: number;
  /** Length of the run in windows. */
  windows: number;
  /** Seed of the PRNG; the same seed always yields the same requests. */
  seed: number;
}

/**
 * mulberry32: a 32-bit PRNG, small and good enough for traffic shapes.
 * Hand-written so the suite needs no dependency and every run is reproducible.
 * @returns a function yielding floats in [0, 1).
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The names of the traffic patterns, in the order the report lists them. */
export const PATTERNS = ['steady', 'poisson', 'bursts', 'straddle', 'mixed-costs', 'edge-burst', 'edge-burst-flood'] as const;

/** One of {@link PATTERNS}. */
export type Pattern = (typeof PATTERNS)[number];

/** One line per pattern, for the report and the docs. */
export const PATTERN_DESCRIPTIONS: Readonly<Record<Pattern, string>> = {
  steady: 'evenly spaced requests at 2× the limit rate',
  poisson: 'Poisson arrivals at 1.2× the limit rate',
  bursts: 'bursts of ½–2× limit requests within 10 ms, about one burst per window (Poisson), quiet between',
  straddle: 'about `limit` requests scattered within ±5% of every aligned window boundary',
  'mixed-costs': 'Poisson arrivals, costs 1–5 (mean 3), at 1.2× the limit rate in units',
  'edge-burst':
    'every 2 windows: 1 request at the boundary, `limit` in the last ms before the next boundary, `limit` on it (the fixed-window attack)',
  'edge-burst-flood':
    'every 3 windows: `limit` requests in the last ms of an aligned window, then one request every window/(4·limit) ms through the next window (the sliding-window and token-bucket attack)',
};

/** Exponential inter-arrival time with mean `mean`, by inversion. */
function exponential(random: () => number, mean: number): number {
  return -Math.log(1 - random()) * mean;
}

/** Requests of cost 1 at the given (fractional) times, floored to whole ms as the clock sees them. */
function atTimes(times: number[]): Request[] {
  return times.map((t) => ({ t: Math.floor(t), cost: 1 }));
}

function poisson(o: TrafficOptions, random: () => number, rate: number): number[] {
  const end = o.windows * o.windowMs;
  const mean = o.windowMs / (rate * o.limit);
  const times: number[] = [];
  for (let t = exponential(random, mean); t < end; t += exponential(random, mean)) times.push(t);
  return times;
}

/**
 * Generates the requests of `pattern`, sorted by time (ties keep their order).
 * Times start at 0, which the drivers place on an aligned window boundary, so
 * "window edges" here are the sliding window's edges, and the fixed window's
 * too whenever a pattern opens it with a request on a boundary.
 */
export function generate(pattern: Pattern, o: TrafficOptions): Request[] {
  const random = mulberry32(o.seed);
  const { limit: L, windowMs: W } = o;
  const end = o.windows * W;
  const out: Request[] = [];
  switch (pattern) {
    case 'steady': {
      // A seeded phase, so different seeds sample different alignments.
      const gap = W / (2 * L);
      for (let t = random() * gap; t < end; t += gap) out.push({ t: Math.floor(t), cost: 1 });
      break;
    }
    case 'poisson':
      out.push(...atTimes(poisson(o, random, 1.2)));
      break;
    case 'bursts': {
      for (let t = exponential(random, W); t < end; t += exponential(random, W)) {
        const size = Math.round(L / 2 + random() * (1.5 * L));
        for (let i = 0; i < size; i++) out.push({ t: Math.floor(t + random() * 10), cost: 1 });
      }
      break;
    }
    case 'straddle': {
      const spread = Math.max(1, W / 20);
      for (let k = 1; k < o.windows; k++) {
        for (let i = 0; i < L; i++) out.push({ t: Math.floor(k * W + (2 * random() - 1) * spread), cost: 1 });
      }
      break;
    }
    case 'mixed-costs': {
      // Mean cost 3, so arrivals at 0.4× the limit rate make 1.2× in units.
      const mean = W / (0.4 * L);
      for (let t = exponential(random, mean); t < end; t += exponential(random, mean)) {
        out.push({ t: Math.floor(t), cost: Math.min(L, 1 + Math.floor(random() * 5)) });
      }
      break;
    }
    case 'edge-burst': {
      // The opening request starts a fixed window on the boundary, so its end
      // is known: `limit` fit just before it (minus the opener) and `limit` more just after.
      for (let k = 0; (2 * k + 1) * W < end; k++) {
        out.push({ t: 2 * k * W, cost: 1 });
        for (let i = 0; i < L; i++) out.push({ t: (2 * k + 1) * W - 1, cost: 1 });
        for (let i = 0; i < L; i++) out.push({ t: (2 * k + 1) * W, cost: 1 });
      }
      break;
    }
    case 'edge-burst-flood': {
      // The burst fills the last ms of an aligned window; the flood then takes
      // every unit the next window's estimate releases. The quiet third window
      // lets every algorithm forget the round before the next one.
      const gap = Math.max(1, W / (4 * L));
      for (let k = 0; 3 * k * W + 2 * W <= end; k++) {
        const edge = 3 * k * W + W;
        for (let i = 0; i < L; i++) out.push({ t: edge - 1, cost: 1 });
        for (let t = edge + random() * gap; t < edge + W; t += gap) out.push({ t: Math.floor(t), cost: 1 });
      }
      break;
    }
  }
  // Stable sort: requests in the same ms keep the order they were generated in.
  return out.filter((r) => r.t >= 0 && r.t < end).sort((a, b) => a.t - b.t);
}
