/** Friendly two-word names for sandboxes created without one (`amber-otter`), unique per host. */
import crypto from 'node:crypto';
import { badRequest } from '../lib/errors.js';

const ADJECTIVES = [
  'amber',
  'bold',
  'brave',
  'bright',
  'brisk',
  'calm',
  'clever',
  'cosmic',
  'crisp',
  'curious',
  'daring',
  'deft',
  'eager',
  'early',
  'fancy',
  'fast',
  'fierce',
  'gentle',
  'glad',
  'golden',
  'grand',
  'happy',
  'hardy',
  'humble',
  'jolly',
  'keen',
  'kind',
  'lively',
  'lucky',
  'lunar',
  'merry',
  'mighty',
  'misty',
  'modest',
  'noble',
  'polar',
  'proud',
  'quick',
  'quiet',
  'rapid',
  'rosy',
  'rustic',
  'sandy',
  'shiny',
  'silent',
  'silver',
  'sleek',
  'smooth',
  'snowy',
  'solar',
  'spry',
  'steady',
  'sunny',
  'swift',
  'tidy',
  'tranquil',
  'vivid',
  'warm',
  'wild',
  'wise',
  'witty',
  'young',
  'zesty',
  'zippy',
];

const NOUNS = [
  'badger',
  'bear',
  'beaver',
  'bison',
  'crane',
  'cricket',
  'dingo',
  'dolphin',
  'eagle',
  'falcon',
  'ferret',
  'finch',
  'fox',
  'gecko',
  'heron',
  'ibis',
  'jackal',
  'jaguar',
  'koala',
  'lark',
  'lemur',
  'lion',
  'llama',
  'lynx',
  'magpie',
  'marmot',
  'marten',
  'mink',
  'moose',
  'newt',
  'ocelot',
  'orca',
  'osprey',
  'otter',
  'owl',
  'panda',
  'parrot',
  'pelican',
  'puffin',
  'quail',
  'rabbit',
  'raven',
  'robin',
  'salmon',
  'seal',
  'shrike',
  'sparrow',
  'squid',
  'stork',
  'swan',
  'tapir',
  'tern',
  'tiger',
  'toucan',
  'trout',
  'turtle',
  'viper',
  'walrus',
  'weasel',
  'whale',
  'wolf',
  'wombat',
  'wren',
  'yak',
];

const pick = <T>(xs: T[]): T => xs[crypto.randomInt(xs.length)];

/** A free friendly name: two words, then with a number when many are taken. */
export function friendlyName(taken: (name: string) => boolean): string {
  for (let i = 0; i < 40; i++) {
    const n = `${pick(ADJECTIVES)}-${pick(NOUNS)}`;
    if (!taken(n)) return n;
  }
  for (;;) {
    const n = `${pick(ADJECTIVES)}-${pick(NOUNS)}-${crypto.randomInt(1000, 100000)}`;
    if (!taken(n)) return n;
  }
}

/**
 * A given name: it becomes the guest's hostname too, so a DNS label of
 * lowercase letters, digits and dashes.
 */
export function checkSandboxName(name: string): string {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name)) {
    throw badRequest("argument 'name' must be 1-63 of [a-z0-9-], starting and ending with a letter or digit (it is the guest's hostname)");
  }
  return name;
}
