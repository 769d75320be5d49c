// Parses a served VAST `adm` with @dailymotion/vast-client, drives its VASTTracker
// through a real playback of every linear creative (impression/creativeView, start,
// quartiles, pause/resume, mute/unmute, complete, click), lets it expand the macros,
// and prints the parsed creatives and every URL it fired as JSON. The Rust test
// (tests/it/vast_playback.rs) fires those URLs at the edge.
//
// usage: node vast_playback.mjs <adm.xml>
import fs from 'node:fs';
import { VASTParser, VASTTracker } from '@dailymotion/vast-client';
import { DOMParser } from '@xmldom/xmldom';

const adm = fs.readFileSync(process.argv[2], 'utf8');
const fired = [];
// vast-client fires URLs with `new Image().src` when a window exists: capture them.
globalThis.window = globalThis;
globalThis.Image = class {
  set src(url) {
    fired.push(url);
  }
};

const doc = new DOMParser().parseFromString(adm, 'text/xml');
const vast = await new VASTParser().parseVAST(doc);
const ad = vast.ads[0];
const out = { adId: ad.id, creatives: [], fired, errors: [] };
for (const creative of ad.creatives.filter((c) => c.type === 'linear')) {
  out.creatives.push({
    universalAdIds: creative.universalAdIds.map((u) => u.value),
    trackingEvents: Object.keys(creative.trackingEvents).sort(),
    duration: creative.duration,
  });
  const tracker = new VASTTracker(null, ad, creative);
  tracker.on('TRACKER-error', (e) => out.errors.push(e.message));
  const d = creative.duration;
  tracker.trackImpression(); // Impression + creativeView
  tracker.setProgress(0.1); // start
  tracker.setPaused(true);
  tracker.setPaused(false);
  tracker.setMuted(true);
  tracker.setMuted(false);
  for (const f of [0.26, 0.51, 0.76, 0.95]) {
    tracker.setProgress(d * f);
  }
  tracker.complete();
  tracker.complete(); // a second call must not fire a second complete
  tracker.click();
}
process.stdout.write(JSON.stringify(out));
