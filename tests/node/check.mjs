// What the node test clients share: check(cond, what) prints and counts a failed check;
// finish(name) says how the checks went and exits 1 if any failed.
let failures = 0;

export const check = (cond, what) => {
  if (!cond) {
    failures++;
    console.log("FAIL:", what);
  }
};

export const finish = (name) => {
  console.log(failures ? `${name}: ${failures} check(s) failed` : `${name}: ok`);
  process.exit(failures ? 1 : 0);
};
