/* test_io_file.c - whole-file reads, atomic writes, directories. */
#include "test_io_util.h"

static void test_atomic_write(void)
{
    char err[256];
    const char *p = tpath("out.bin");
    void *data = NULL;
    size_t size = 0;
    struct stat st;

    OK(bfp_io_write_file_atomic(p, "hello", 5, 0, err, sizeof err) == BFP_OK,
       "atomic write creates a new file");
    OK(bfp_io_read_file(p, &data, &size, err, sizeof err) == BFP_OK &&
           size == 5 && memcmp(data, "hello", 5) == 0,
       "read_file returns what was written");
    free(data);
    OK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "new file has mode 0644");

    err[0] = '\0';
    OK(bfp_io_write_file_atomic(p, "xx", 2, 0, err, sizeof err) == BFP_ERR_IO,
       "refuses to overwrite without force");
    OK(strstr(err, "exists") && strstr(err, "--force") && strstr(err, p),
       "refusal message names the path and --force: %s", err);
    OK(bfp_io_read_file(p, &data, &size, err, sizeof err) == BFP_OK &&
           size == 5 && memcmp(data, "hello", 5) == 0,
       "refused write leaves the old file untouched");
    free(data);

    OK(bfp_io_write_file_atomic(p, "bye", 3, 1, err, sizeof err) == BFP_OK,
       "overwrites with force");
    OK(bfp_io_read_file(p, &data, &size, err, sizeof err) == BFP_OK &&
           size == 3 && memcmp(data, "bye", 3) == 0,
       "forced write replaced the content");
    free(data);
    OK(tdir_count() == 1, "no temporary file left behind");

    OK(bfp_io_write_file_atomic(tpath("empty.bin"), NULL, 0, 0, err, sizeof err) == BFP_OK,
       "zero-byte write with NULL data");
    OK(bfp_io_read_file(tpath("empty.bin"), &data, &size, err, sizeof err) == BFP_OK &&
           size == 0,
       "zero-byte file reads as size 0");
    free(data);
    unlink(tpath("empty.bin"));
}

static void test_failed_writes(void)
{
    char err[256];
    int before = tdir_count();

    err[0] = '\0';
    OK(bfp_io_write_file_atomic(tpath("nodir/out.bin"), "x", 1, 1, err,
                                sizeof err) == BFP_ERR_IO,
       "write into a missing directory fails");
    OK(err[0] != '\0' && strchr(err, '\n') == NULL, "with one error line: %s", err);
    OK(access(tpath("nodir/out.bin"), F_OK) != 0 && tdir_count() == before,
       "and leaves nothing behind");

    /* rename() onto a non-empty directory fails after the data was written:
     * the temporary file must go away and the directory stay. */
    const char *d = tpath("adir");
    OK(bfp_io_make_dir(d, err, sizeof err) == BFP_OK, "make_dir creates");
    OK(bfp_io_make_dir(d, err, sizeof err) == BFP_OK, "make_dir on an existing dir is fine");
    OK(write_raw(tpath("adir/keep"), "k", 1) == 0, "fixture inside the dir");
    before = tdir_count();
    OK(bfp_io_write_file_atomic(d, "data", 4, 1, err, sizeof err) == BFP_ERR_IO,
       "forced write onto a directory fails: %s", err);
    OK(tdir_count() == before, "temporary file removed after the failed rename");
    OK(access(tpath("adir/keep"), F_OK) == 0, "the directory is untouched");
    unlink(tpath("adir/keep"));
    rmdir(d);

    OK(bfp_io_write_file_atomic(NULL, "x", 1, 1, err, sizeof err) == BFP_ERR_ARG,
       "NULL path is an argument error");
    OK(bfp_io_write_file_atomic(tpath("n.bin"), NULL, 4, 1, err, sizeof err) == BFP_ERR_ARG,
       "NULL data with a size is an argument error");
    OK(access(tpath("n.bin"), F_OK) != 0, "and writes nothing");
}

/* A name as long as a file system allows: the temporary name must not be
 * built by appending to it. */
static void test_long_name(void)
{
    char err[256] = "", name[251];
    void *data = NULL;
    size_t size = 0;
    memset(name, 'n', 250);
    name[250] = '\0';
    int before = tdir_count();
    OK(bfp_io_write_file_atomic(tpath(name), "long", 4, 0, err, sizeof err) == BFP_OK,
       "a 250-byte file name is written: %s", err);
    OK(bfp_io_read_file(tpath(name), &data, &size, err, sizeof err) == BFP_OK &&
           size == 4 && memcmp(data, "long", 4) == 0,
       "and reads back");
    free(data);
    OK(tdir_count() == before + 1, "no temporary file left beside it");
    unlink(tpath(name));
}

static void test_quote_name(void)
{
    char b[BFP_IO_QUOTE_MAX], small[16], big[400];
    OK(strcmp(bfp_io_quote_name("w.0", b, sizeof b), "'w.0'") == 0, "plain name quoted: %s", b);
    OK(strcmp(bfp_io_quote_name("\x1b[31m a\tb\x7f", b, sizeof b), "'\\x1b[31m a\\x09b\\x7f'") == 0,
       "control characters escaped: %s", b);
    OK(strcmp(bfp_io_quote_name("it's a\\b", b, sizeof b), "'it\\'s a\\\\b'") == 0,
       "quote and backslash escaped: %s", b);
    OK(strcmp(bfp_io_quote_name("", b, sizeof b), "''") == 0, "empty name: %s", b);
    OK(strcmp(bfp_io_quote_name("gr\xc3\xbc\xc3\x9f" "e \xe2\x82\xac", b, sizeof b),
              "'gr\xc3\xbc\xc3\x9f" "e \xe2\x82\xac'") == 0,
       "printable UTF-8 kept: %s", b);
    OK(strcmp(bfp_io_quote_name("a\xc2\x9b" "31m\xff\xc3", b, sizeof b),
              "'a\\xc2\\x9b31m\\xff\\xc3'") == 0,
       "C1 controls (U+009B, CSI) and invalid UTF-8 escaped byte by byte: %s", b);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    bfp_io_quote_name(big, small, sizeof small);
    OK(strlen(small) < sizeof small && strcmp(small + strlen(small) - 4, "...'") == 0,
       "a long name is cut with ...: %s", small);
    bfp_io_quote_name(big, b, sizeof b);
    OK(strlen(b) == sizeof b - 1 || strlen(b) == sizeof b - 2, "and fills its buffer (%zu)", strlen(b));
    OK(strcmp(bfp_io_quote_name("x", small, 4), "'?'") == 0, "a tiny buffer is safe");
}

static int dir_count(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A directory written as one set: exactly the new files, or the old set. */
static void test_dir_set(void)
{
    static const char *const owned[] = {"a.bin", "b.bin", "c.bin"};
    const bfp_io_file ab[2] = {{"a.bin", "AA", 2}, {"b.bin", "BB", 2}};
    const bfp_io_file c[1] = {{"c.bin", "C", 1}};
    const bfp_io_file bad[1] = {{"../x", "X", 1}};
    const bfp_io_file stranger[1] = {{"z.bin", "Z", 1}};
    const char *d = tpath("set");
    char err[256] = "";
    void *data = NULL;
    size_t size = 0;
    int before = tdir_count();

    OK(bfp_io_write_dir_atomic(d, ab, 2, owned, 3, 0, err, sizeof err) == BFP_OK,
       "a new directory gets the set: %s", err);
    OK(dir_count(d) == 2 && tdir_count() == before + 1, "two files, no temporary directory");
    OK(bfp_io_write_dir_atomic(d, c, 1, owned, 3, 0, err, sizeof err) == BFP_ERR_IO &&
           strstr(err, "--force"),
       "an existing set is not replaced without force: %s", err);
    OK(bfp_io_write_dir_atomic(d, c, 1, owned, 3, 1, err, sizeof err) == BFP_OK,
       "with force it is");
    OK(dir_count(d) == 1 && access(tpath("set/a.bin"), F_OK) != 0 &&
           bfp_io_read_file(tpath("set/c.bin"), &data, &size, err, sizeof err) == BFP_OK &&
           size == 1,
       "and holds only the new set (no stale a.bin, b.bin)");
    free(data);
    OK(tdir_count() == before + 1, "the old set was removed");
    OK(bfp_io_write_dir_atomic(d, bad, 1, owned, 3, 1, err, sizeof err) == BFP_ERR_ARG,
       "a file name with a slash is refused: %s", err);
    OK(bfp_io_write_dir_atomic(d, stranger, 1, owned, 3, 1, err, sizeof err) == BFP_ERR_ARG,
       "a file name not among the owned ones is refused: %s", err);
    OK(write_raw(tpath("set/mine.txt"), "m", 1) == 0, "a user's file in the set");
    OK(bfp_io_write_dir_atomic(d, ab, 2, owned, 3, 1, err, sizeof err) == BFP_ERR_IO &&
           strstr(err, "'mine.txt'"),
       "a directory holding a foreign file is not replaced, even with force: %s", err);
    OK(dir_count(d) == 2 && tdir_count() == before + 1, "and stays as it was");
    unlink(tpath("set/mine.txt"));
    unlink(tpath("set/c.bin"));
    rmdir(d);
    OK(bfp_io_write_dir_atomic(tpath("nodir/set"), ab, 2, owned, 3, 1, err, sizeof err) ==
               BFP_ERR_IO &&
           strstr(err, "nodir/set") && tdir_count() == before,
       "parents are not created, nothing left: %s", err);
}

static void test_read_and_dirs(void)
{
    char err[256];
    void *data = (void *)1;
    size_t size = 7;

    OK(bfp_io_read_file(tpath("missing"), &data, &size, err, sizeof err) == BFP_ERR_IO &&
           data == NULL && size == 0,
       "reading a missing file fails and clears outputs");
    OK(strstr(err, "missing") != NULL, "message names the file: %s", err);
    OK(bfp_io_read_file(tdir, &data, &size, err, sizeof err) == BFP_ERR_IO,
       "reading a directory fails: %s", err);
    OK(bfp_io_read_file(tpath("x"), NULL, &size, err, sizeof err) == BFP_ERR_ARG,
       "NULL output is an argument error");

    OK(write_raw(tpath("plain"), "p", 1) == 0, "fixture file");
    OK(bfp_io_make_dir(tpath("plain"), err, sizeof err) == BFP_ERR_IO,
       "make_dir over a file fails: %s", err);
    OK(bfp_io_make_dir(tpath("a/b"), err, sizeof err) == BFP_ERR_IO,
       "make_dir does not create parents: %s", err);
    unlink(tpath("plain"));

    /* errlen 0 and NULL err must be safe */
    OK(bfp_io_read_file(tpath("missing"), &data, &size, NULL, 0) == BFP_ERR_IO,
       "NULL err is accepted");
    OK(bfp_io_read_file(tpath("missing"), &data, &size, err, 0) == BFP_ERR_IO,
       "errlen 0 is accepted");
    char small[8];
    OK(bfp_io_read_file(tpath("missing"), &data, &size, small, sizeof small) == BFP_ERR_IO &&
           strlen(small) == sizeof small - 1,
       "a small err buffer gets a truncated, terminated line");
}

int main(void)
{
    tdir_make();
    test_atomic_write();
    test_failed_writes();
    test_read_and_dirs();
    test_long_name();
    test_quote_name();
    test_dir_set();
    return check_summary("test_io_file");
}
