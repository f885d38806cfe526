/**
 * Names the folders API creates: the server's rule (validateName) and the
 * registry's schemas, which state the same rules so that clients and fuzzers
 * see them before sending.
 */
import { expect } from 'chai';
import { getOperation } from '../../../api/registry/index.js';
import { validateArgs } from '../../../api/validate.js';
import { ApiError } from '../../../daemon/lib/errors.js';
import { checkNotInternal, validateName, validateNewEntry } from '../../../daemon/folders/names.js';

function refusal(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    expect(err).to.be.instanceOf(ApiError);
    expect((err as ApiError).status).to.equal(400);
    return (err as ApiError).message;
  }
}

const valid = (op: string, args: Record<string, unknown>) => refusal(() => validateArgs(getOperation(op)!, args));

describe('folders names: control characters', () => {
  it('refuses C0, DEL and C1 control characters in every name, NUL keeping its own message', () => {
    for (const n of ['nl\nname', 'tab\there', 'cr\r', 'esc\x1b[31m', 'bell\x07', 'del\x7f', 'nel\x85', 'csi\x9b', '\x01']) {
      expect(
        refusal(() => validateName(n, 'name')),
        JSON.stringify(n),
      ).to.equal("argument 'name' must not contain control characters");
    }
    expect(refusal(() => validateName('a\0b', 'names[1]'))).to.equal("argument 'names[1]' must not contain NUL bytes");
    for (const n of ['plain', 'with space', 'ünïcødé', 'emoji 😀', 'nbsp\u00a0ok', 'zero\u200bwidth']) expect(validateName(n, 'name')).to.equal(n);
  });

  it('refuses them in the name a destination path creates, not in the folders on its way', () => {
    expect(refusal(() => validateNewEntry('dir/new\nname', 'dst_sub_path'))).to.equal(
      "argument 'dst_sub_path' must not contain control characters in the name it creates",
    );
    expect(refusal(() => validateNewEntry('x\x7f', 'moves[0].dst_sub_path'))).to.equal(
      "argument 'moves[0].dst_sub_path' must not contain control characters in the name it creates",
    );
    expect(refusal(() => validateNewEntry('odd\tdir/fine', 'dst_sub_path'))).to.equal(null);
  });
});

describe('folders names: the schema states the server rules', () => {
  it('the name schemas accept and refuse what the service does (byte length and NFKC forms aside)', () => {
    const samples = [
      'media',
      '.hidden',
      '...',
      'a.b',
      'ünï',
      '',
      '.',
      '..',
      'a/b',
      '/',
      'a\\b',
      'a\0b',
      'nl\nx',
      'del\x7f',
      'c1\x85',
      'x\ud800',
      '.hostd-x',
      '.HOSTD-x',
      '.Hostd-trash-1',
      '.hostd',
      '.vms',
      '.VMS',
      '.vmsx',
      'x'.repeat(255),
    ];
    for (const s of samples) {
      const server = refusal(() => validateName(s, 'name')) === null;
      const folderServer = server && refusal(() => checkNotInternal(s, 'name')) === null;
      expect(valid('folders_subfolders_create', { folder_id: 'f', name: s }) === null, JSON.stringify(s)).to.equal(server);
      expect(valid('folders_create', { storage_id: 'p', name: s }) === null, JSON.stringify(s)).to.equal(folderServer);
      expect(valid('folders_update', { folder_id: 'f', new_name: s }) === null, JSON.stringify(s)).to.equal(folderServer);
    }
  });

  it('refuses before the service what the service would refuse', () => {
    expect(valid('folders_create', { storage_id: 'p', name: '' })).to.equal("argument 'name' must not be empty");
    expect(valid('folders_create', { storage_id: 'p', name: 'nl\nname' })).to.equal(
      "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
    );
    expect(valid('folders_create', { storage_id: 'p', name: '.hostd-trash-1' })).to.equal(
      "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
    );
    expect(valid('folders_create', { storage_id: 'p', name: '.VMS' })).to.equal(
      "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
    );
    expect(valid('folders_create', { storage_id: 'p', name: 'x'.repeat(256) })).to.equal("argument 'name' must be at most 255 characters");
    expect(valid('folders_update', { folder_id: 'f', new_name: '' })).to.equal("argument 'new_name' must not be empty");
    expect(valid('folders_update', { folder_id: 'f', new_name: '..' })).to.equal(
      "argument 'new_name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..', not '.vms' and not starting with '.hostd-', in any case (hostd's own directories)",
    );
    expect(valid('folders_subfolders_create', { folder_id: 'f', name: 'a/b' })).to.equal(
      "argument 'name' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..'",
    );
    expect(valid('folders_subfolders_batch_create', { folder_id: 'f', names: [] })).to.match(/^argument 'names' must NOT have fewer than 1 items/);
    expect(valid('folders_subfolders_batch_create', { folder_id: 'f', names: ['a', 'a'] })).to.match(/^argument 'names' must NOT have duplicate items/);
    expect(valid('folders_subfolders_batch_create', { folder_id: 'f', names: ['ok', 'tab\t'] })).to.equal(
      "argument 'names[1]' must be a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..'",
    );
    expect(valid('folders_search', { folder_id: 'f', pattern: '' })).to.equal("argument 'pattern' must not be empty");
    expect(valid('folders_entries_batch_move', { folder_id: 'f', moves: [] })).to.match(/^argument 'moves' must NOT have fewer than 1 items/);
    expect(valid('folders_entries_batch_move', { folder_id: 'f', moves: [{ src_sub_path: '', dst_sub_path: 'x' }] })).to.equal(
      "argument 'moves[0].src_sub_path' must not be empty",
    );
    // What the service accepts passes.
    expect(valid('folders_create', { storage_id: 'p', name: 'media' })).to.equal(null);
    expect(valid('folders_subfolders_batch_create', { folder_id: 'f', names: ['a', 'b'] })).to.equal(null);
    expect(valid('folders_entries_copy', { src_folder_id: 'f', src_sub_path: 'a', dst_folder_id: 'g' })).to.equal(null);
  });
});
