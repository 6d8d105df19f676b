/* Files in C, with stdio and POSIX calls only: writes /data/c.txt,
 * reads it back, lists /data. Knows nothing of Warden. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    const char *text = "written by c\n";
    FILE *f = fopen("/data/c.txt", "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) { perror("write /data/c.txt"); return 1; }
    char buf[64] = {0};
    f = fopen("/data/c.txt", "r");
    if (!f || !fgets(buf, sizeof buf, f)) { perror("read /data/c.txt"); return 1; }
    fclose(f);
    if (strcmp(buf, text) != 0) { printf("c: read back %s", buf); return 1; }
    DIR *d = opendir("/data");
    if (!d) { perror("opendir /data"); return 1; }
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    printf("c: wrote and read back /data/c.txt; /data lists %d names\n", n);
    return 0;
}
