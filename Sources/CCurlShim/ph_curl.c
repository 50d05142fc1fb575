/* ph_curl.c: see include/ph_curl.h. */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dladdr */
#endif
#include "ph_curl.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* libcurl's own layouts for the two structs we read. */
typedef struct {
    int age;
    const char *version;
    unsigned int version_num;
    const char *host;
    int features;
    const char *ssl_version;
} curl_version_info_prefix;

typedef struct {
    int msg;          /* CURLMSG_DONE == 1 */
    void *easy_handle;
    union {
        void *whatever;
        int result;
    } data;
} curl_msg_layout;

struct curl_blob_layout {
    void *data;
    size_t len;
    unsigned int flags; /* CURL_BLOB_COPY == 1 */
};

static struct {
    int (*global_init)(long flags);
    curl_version_info_prefix *(*version_info)(int age);
    void *(*easy_init)(void);
    void (*easy_cleanup)(void *);
    void (*easy_reset)(void *);
    int (*easy_setopt)(void *, int, ...);
    int (*easy_getinfo)(void *, int, ...);
    const char *(*easy_strerror)(int);
    void *(*slist_append)(void *, const char *);
    void (*slist_free_all)(void *);
    void *(*multi_init)(void);
    int (*multi_cleanup)(void *);
    int (*multi_setopt)(void *, int, ...);
    int (*multi_add_handle)(void *, void *);
    int (*multi_remove_handle)(void *, void *);
    int (*multi_perform)(void *, int *);
    int (*multi_poll)(void *, void *, unsigned int, int, int *);
    int (*multi_wakeup)(void *);
    curl_msg_layout *(*multi_info_read)(void *, int *);
    const char *(*multi_strerror)(int);
} api;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded = 0;
/* The loaded library's file, its links resolved (what a later path is compared with). */
static char loaded_file[PATH_MAX];

static int resolve(void *library, const char *name, void **slot, char *error, size_t error_size) {
    *slot = dlsym(library, name);
    if (*slot == NULL) {
        snprintf(error, error_size, "libcurl lacks %s", name);
        return -1;
    }
    return 0;
}

int ph_curl_load(const char *path, char *error, size_t error_size) {
    pthread_mutex_lock(&load_lock);
    if (loaded) {
        /* One libcurl serves the process: a path naming another file is refused, never answered
         * with the library loaded first. */
        int result = 0;
        char wanted[PATH_MAX];
        if (path != NULL && (realpath(path, wanted) == NULL || strcmp(wanted, loaded_file) != 0)) {
            snprintf(error, error_size, "cannot load libcurl from %s: libcurl is loaded from %s already (one libcurl serves a process)",
                     path, loaded_file);
            result = -1;
        }
        pthread_mutex_unlock(&load_lock);
        return result;
    }
#if defined(__APPLE__)
    static const char *const names[] = {"libcurl.4.dylib", "/usr/lib/libcurl.4.dylib", NULL};
#else
    static const char *const names[] = {"libcurl.so.4", "libcurl.so", NULL};
#endif
    void *library = NULL;
    char last[512] = "";
    if (path != NULL) {
        library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (library == NULL) snprintf(last, sizeof last, "%s", dlerror());
    } else {
        for (int i = 0; names[i] != NULL && library == NULL; i++) {
            library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            if (library == NULL) snprintf(last, sizeof last, "%s", dlerror());
        }
    }
    if (library == NULL) {
        snprintf(error, error_size, "cannot load libcurl: %s", last);
        pthread_mutex_unlock(&load_lock);
        return -1;
    }
#define RESOLVE(field, name) \
    if (resolve(library, name, (void **)&api.field, error, error_size) != 0) goto fail;
    RESOLVE(global_init, "curl_global_init")
    RESOLVE(version_info, "curl_version_info")
    RESOLVE(easy_init, "curl_easy_init")
    RESOLVE(easy_cleanup, "curl_easy_cleanup")
    RESOLVE(easy_reset, "curl_easy_reset")
    RESOLVE(easy_setopt, "curl_easy_setopt")
    RESOLVE(easy_getinfo, "curl_easy_getinfo")
    RESOLVE(easy_strerror, "curl_easy_strerror")
    RESOLVE(slist_append, "curl_slist_append")
    RESOLVE(slist_free_all, "curl_slist_free_all")
    RESOLVE(multi_init, "curl_multi_init")
    RESOLVE(multi_cleanup, "curl_multi_cleanup")
    RESOLVE(multi_setopt, "curl_multi_setopt")
    RESOLVE(multi_add_handle, "curl_multi_add_handle")
    RESOLVE(multi_remove_handle, "curl_multi_remove_handle")
    RESOLVE(multi_perform, "curl_multi_perform")
    RESOLVE(multi_poll, "curl_multi_poll")
    RESOLVE(multi_wakeup, "curl_multi_wakeup")
    RESOLVE(multi_info_read, "curl_multi_info_read")
    RESOLVE(multi_strerror, "curl_multi_strerror")
#undef RESOLVE
    /* CURL_GLOBAL_ALL; done once, before any other thread uses libcurl. */
    if (api.global_init(3) != 0) {
        snprintf(error, error_size, "curl_global_init failed");
        goto fail;
    }
    Dl_info info;
    if (dladdr((void *)api.easy_init, &info) == 0 || info.dli_fname == NULL || realpath(info.dli_fname, loaded_file) == NULL) {
        snprintf(loaded_file, sizeof loaded_file, "%s", path != NULL ? path : names[0]);
    }
    loaded = 1;
    pthread_mutex_unlock(&load_lock);
    return 0;
fail:
    /* The library stays open: it may be libcurl that FoundationNetworking also uses. */
    memset(&api, 0, sizeof api);
    pthread_mutex_unlock(&load_lock);
    return -1;
}

const char *ph_curl_loaded_file(void) {
    pthread_mutex_lock(&load_lock);
    const char *file = loaded ? loaded_file : NULL;
    pthread_mutex_unlock(&load_lock);
    return file;
}

ph_curl_version_info ph_curl_version(void) {
    ph_curl_version_info info = {0};
    curl_version_info_prefix *data = api.version_info(9 /* CURLVERSION_TENTH */);
    if (data != NULL) {
        info.version = data->version;
        info.version_num = data->version_num;
        info.features = data->features;
        info.ssl_version = data->ssl_version;
    }
    return info;
}

ph_curl_easy *ph_curl_easy_init(void) { return api.easy_init(); }
void ph_curl_easy_cleanup(ph_curl_easy *easy) { api.easy_cleanup(easy); }
void ph_curl_easy_reset(ph_curl_easy *easy) { api.easy_reset(easy); }

int ph_curl_easy_setopt_long(ph_curl_easy *easy, int option, long value) {
    return api.easy_setopt(easy, option, value);
}
int ph_curl_easy_setopt_ptr(ph_curl_easy *easy, int option, const void *value) {
    return api.easy_setopt(easy, option, value);
}
int ph_curl_easy_setopt_off(ph_curl_easy *easy, int option, ph_curl_off_t value) {
    return api.easy_setopt(easy, option, value);
}
int ph_curl_easy_setopt_data_callback(ph_curl_easy *easy, int option, ph_curl_data_callback callback) {
    return api.easy_setopt(easy, option, callback);
}
int ph_curl_easy_setopt_xferinfo_callback(ph_curl_easy *easy, int option, ph_curl_xferinfo_callback callback) {
    return api.easy_setopt(easy, option, callback);
}
int ph_curl_easy_setopt_seek_callback(ph_curl_easy *easy, int option, ph_curl_seek_callback callback) {
    return api.easy_setopt(easy, option, callback);
}
/* libcurl's struct curl_sockaddr: `addr` holds `addrlen` bytes (an IPv6 address fits). */
struct ph_curl_sockaddr {
    int family;
    int socktype;
    int protocol;
    unsigned int addrlen;
    struct sockaddr addr;
};

static int ph_open_socket(void *clientp, int purpose, struct ph_curl_sockaddr *address) {
    (void)purpose;
    ph_curl_peer *peer = clientp;
#if defined(SOCK_CLOEXEC)
    int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
#else
    int fd = socket(address->family, address->socktype, address->protocol);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
    if (peer == NULL || peer->ambiguous) return fd;
    char text[64] = {0};
    long port = 0;
    if (fd >= 0 && address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, &address->addr, sizeof in);
        if (inet_ntop(AF_INET, &in.sin_addr, text, sizeof text)) port = ntohs(in.sin_port);
    } else if (fd >= 0 && address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, &address->addr, sizeof in6);
        if (inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text)) port = ntohs(in6.sin6_port);
    }
    /* A second peer (another address of the host, tried beside the first) leaves it unknown
     * which one the connection was made to; so does a socket that could not be made or named. */
    if (port == 0 || (peer->port != 0 && (peer->port != port || strcmp(peer->address, text) != 0))) {
        peer->ambiguous = 1;
        peer->address[0] = 0;
        peer->port = 0;
        return fd;
    }
    memcpy(peer->address, text, sizeof text);
    peer->port = port;
    return fd;
}

int ph_curl_easy_record_peer(ph_curl_easy *easy, ph_curl_peer *peer) {
    int code = api.easy_setopt(easy, 20163 /* CURLOPT_OPENSOCKETFUNCTION */, ph_open_socket);
    if (code != 0) return code;
    return api.easy_setopt(easy, 10164 /* CURLOPT_OPENSOCKETDATA */, peer);
}

int ph_curl_easy_setopt_blob(ph_curl_easy *easy, int option, const void *data, size_t length) {
    struct curl_blob_layout blob = {(void *)data, length, 1 /* CURL_BLOB_COPY */};
    return api.easy_setopt(easy, option, &blob);
}
int ph_curl_easy_getinfo_long(ph_curl_easy *easy, int info, long *value) {
    return api.easy_getinfo(easy, info, value);
}
int ph_curl_easy_getinfo_off(ph_curl_easy *easy, int info, ph_curl_off_t *value) {
    return api.easy_getinfo(easy, info, value);
}
int ph_curl_easy_getinfo_string(ph_curl_easy *easy, int info, const char **value) {
    return api.easy_getinfo(easy, info, value);
}
const char *ph_curl_easy_strerror(int code) { return api.easy_strerror(code); }

ph_curl_slist *ph_curl_slist_append(ph_curl_slist *list, const char *line) {
    return api.slist_append(list, line);
}
void ph_curl_slist_free_all(ph_curl_slist *list) { api.slist_free_all(list); }

ph_curl_multi *ph_curl_multi_init(void) { return api.multi_init(); }
int ph_curl_multi_cleanup(ph_curl_multi *multi) { return api.multi_cleanup(multi); }
int ph_curl_multi_setopt_long(ph_curl_multi *multi, int option, long value) {
    return api.multi_setopt(multi, option, value);
}
int ph_curl_multi_add_handle(ph_curl_multi *multi, ph_curl_easy *easy) { return api.multi_add_handle(multi, easy); }
int ph_curl_multi_remove_handle(ph_curl_multi *multi, ph_curl_easy *easy) {
    return api.multi_remove_handle(multi, easy);
}
int ph_curl_multi_perform(ph_curl_multi *multi, int *running) { return api.multi_perform(multi, running); }
int ph_curl_multi_poll(ph_curl_multi *multi, int timeout_ms, int *numfds) {
    return api.multi_poll(multi, NULL, 0, timeout_ms, numfds);
}
int ph_curl_multi_wakeup(ph_curl_multi *multi) { return api.multi_wakeup(multi); }
const char *ph_curl_multi_strerror(int code) { return api.multi_strerror(code); }

int ph_curl_multi_info_read_done(ph_curl_multi *multi, ph_curl_easy **easy, int *result) {
    int queued = 0;
    curl_msg_layout *message;
    while ((message = api.multi_info_read(multi, &queued)) != NULL) {
        if (message->msg == 1 /* CURLMSG_DONE */) {
            *easy = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}
