/*
 * ph_curl.h: a small shim over libcurl, loaded at run time with dlopen.
 *
 * No libcurl headers and no link-time dependency: ph_curl_load() opens the library and
 * resolves the dozen functions the transport calls. The variadic libcurl calls
 * (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt) are wrapped in typed functions
 * (long, pointer, curl_off_t, function pointer), so Swift never calls a C variadic.
 *
 * The option, info and result numbers below are libcurl's stable ABI (curl/curl.h,
 * curl/multi.h); each is named after its curl name with a PH_ prefix.
 */
#ifndef PH_CURL_H
#define PH_CURL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void ph_curl_easy;
typedef void ph_curl_multi;
typedef struct ph_curl_slist ph_curl_slist;
typedef int64_t ph_curl_off_t;

/* Callbacks, in libcurl's own signatures. */
typedef size_t (*ph_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*ph_curl_xferinfo_callback)(void *userdata, ph_curl_off_t dltotal, ph_curl_off_t dlnow,
                                         ph_curl_off_t ultotal, ph_curl_off_t ulnow);
typedef int (*ph_curl_seek_callback)(void *userdata, ph_curl_off_t offset, int origin);

/* What ph_curl_version() reports of the loaded library. */
typedef struct {
    const char *version;        /* e.g. "7.88.1" */
    unsigned int version_num;   /* 0xXXYYZZ */
    int features;               /* CURL_VERSION_* bits */
    const char *ssl_version;    /* e.g. "OpenSSL/3.0.11", or NULL */
} ph_curl_version_info;

/* Loads libcurl from `path` (NULL: the platform's usual names) and resolves every symbol.
 * Returns 0 on success; otherwise -1 with a message in `error`. Safe to call more than once
 * and from several threads: the first successful load wins, and serves the process; a later
 * `path` naming another file (links resolved) is refused with -1 and a message naming both. */
int ph_curl_load(const char *path, char *error, size_t error_size);
/* The loaded library's file, links resolved (NULL before a load succeeded). */
const char *ph_curl_loaded_file(void);
/* The version of the loaded library (ph_curl_load must have succeeded). */
ph_curl_version_info ph_curl_version(void);

/* Easy handles. */
ph_curl_easy *ph_curl_easy_init(void);
void ph_curl_easy_cleanup(ph_curl_easy *easy);
void ph_curl_easy_reset(ph_curl_easy *easy);
int ph_curl_easy_setopt_long(ph_curl_easy *easy, int option, long value);
int ph_curl_easy_setopt_ptr(ph_curl_easy *easy, int option, const void *value);
int ph_curl_easy_setopt_off(ph_curl_easy *easy, int option, ph_curl_off_t value);
int ph_curl_easy_setopt_data_callback(ph_curl_easy *easy, int option, ph_curl_data_callback callback);
int ph_curl_easy_setopt_xferinfo_callback(ph_curl_easy *easy, int option, ph_curl_xferinfo_callback callback);
int ph_curl_easy_setopt_seek_callback(ph_curl_easy *easy, int option, ph_curl_seek_callback callback);
/* The peer a handle's sockets went to since the last reset: its numeric address and port.
 * libcurl's CURLINFO_PRIMARY_IP/PORT name only a connection it completed, and some libcurl 8
 * releases complete none whose TLS handshake or proxy tunnel failed: this says where it went. */
typedef struct {
    char address[64]; /* empty: no socket opened since the last reset, or sockets to more than one peer */
    long port;
    int ambiguous; /* set once sockets went to two peers (happy eyeballs): none is named */
} ph_curl_peer;
/* Opens the handle's sockets (close-on-exec) through a callback that records their peer in
 * `peer` (zeroed by the caller first), which must outlive the transfer (CURLOPT_OPENSOCKETFUNCTION
 * and _DATA). */
int ph_curl_easy_record_peer(ph_curl_easy *easy, ph_curl_peer *peer);
/* A blob option (CURLOPT_*_BLOB): libcurl copies the bytes. */
int ph_curl_easy_setopt_blob(ph_curl_easy *easy, int option, const void *data, size_t length);
int ph_curl_easy_getinfo_long(ph_curl_easy *easy, int info, long *value);
int ph_curl_easy_getinfo_off(ph_curl_easy *easy, int info, ph_curl_off_t *value);
int ph_curl_easy_getinfo_string(ph_curl_easy *easy, int info, const char **value);
const char *ph_curl_easy_strerror(int code);

/* Header lists. */
ph_curl_slist *ph_curl_slist_append(ph_curl_slist *list, const char *line);
void ph_curl_slist_free_all(ph_curl_slist *list);

/* Multi handles. */
ph_curl_multi *ph_curl_multi_init(void);
int ph_curl_multi_cleanup(ph_curl_multi *multi);
int ph_curl_multi_setopt_long(ph_curl_multi *multi, int option, long value);
int ph_curl_multi_add_handle(ph_curl_multi *multi, ph_curl_easy *easy);
int ph_curl_multi_remove_handle(ph_curl_multi *multi, ph_curl_easy *easy);
int ph_curl_multi_perform(ph_curl_multi *multi, int *running);
int ph_curl_multi_poll(ph_curl_multi *multi, int timeout_ms, int *numfds);
int ph_curl_multi_wakeup(ph_curl_multi *multi);
const char *ph_curl_multi_strerror(int code);
/* Reads one finished transfer: returns 1 and fills `easy` and `result`, or 0 when none is left. */
int ph_curl_multi_info_read_done(ph_curl_multi *multi, ph_curl_easy **easy, int *result);

/* curl_version_info features. */
#define PH_CURL_VERSION_SSL (1 << 2)
#define PH_CURL_VERSION_LIBZ (1 << 3)
#define PH_CURL_VERSION_HTTP2 (1 << 16)
#define PH_CURL_VERSION_BROTLI (1 << 23)
#define PH_CURL_VERSION_ZSTD (1 << 26)

/* CURLcode */
#define PH_CURLE_OK 0
#define PH_CURLE_UNSUPPORTED_PROTOCOL 1
#define PH_CURLE_URL_MALFORMAT 3
#define PH_CURLE_COULDNT_RESOLVE_PROXY 5
#define PH_CURLE_COULDNT_RESOLVE_HOST 6
#define PH_CURLE_COULDNT_CONNECT 7
#define PH_CURLE_WEIRD_SERVER_REPLY 8
#define PH_CURLE_HTTP2 16
#define PH_CURLE_PARTIAL_FILE 18
#define PH_CURLE_WRITE_ERROR 23
#define PH_CURLE_READ_ERROR 26
#define PH_CURLE_OUT_OF_MEMORY 27
#define PH_CURLE_OPERATION_TIMEDOUT 28
#define PH_CURLE_SSL_CONNECT_ERROR 35
#define PH_CURLE_ABORTED_BY_CALLBACK 42
#define PH_CURLE_BAD_FUNCTION_ARGUMENT 43
#define PH_CURLE_TOO_MANY_REDIRECTS 47
#define PH_CURLE_GOT_NOTHING 52
#define PH_CURLE_SSL_ENGINE_NOTFOUND 53
#define PH_CURLE_SEND_ERROR 55
#define PH_CURLE_RECV_ERROR 56
#define PH_CURLE_SSL_CERTPROBLEM 58
#define PH_CURLE_SSL_CIPHER 59
#define PH_CURLE_PEER_FAILED_VERIFICATION 60
#define PH_CURLE_BAD_CONTENT_ENCODING 61
#define PH_CURLE_SEND_FAIL_REWIND 65
#define PH_CURLE_SSL_CACERT_BADFILE 77
#define PH_CURLE_SSL_SHUTDOWN_FAILED 80
#define PH_CURLE_SSL_CRL_BADFILE 82
#define PH_CURLE_SSL_ISSUER_ERROR 83
#define PH_CURLE_HTTP2_STREAM 92
#define PH_CURLE_TOO_LARGE 100
#define PH_CURLE_SSL_PINNEDPUBKEYNOTMATCH 90
#define PH_CURLE_SSL_INVALIDCERTSTATUS 91
#define PH_CURLE_PROXY 97
#define PH_CURLE_SSL_CLIENTCERT 98

/* CURLoption: long options */
#define PH_CURLOPT_TIMEOUT_MS 155
#define PH_CURLOPT_CONNECTTIMEOUT_MS 156
#define PH_CURLOPT_NOPROGRESS 43
#define PH_CURLOPT_NOBODY 44
#define PH_CURLOPT_POST 47
#define PH_CURLOPT_FOLLOWLOCATION 52
#define PH_CURLOPT_SSLVERSION 32
#define PH_CURLOPT_SSL_VERIFYPEER 64
#define PH_CURLOPT_SSL_VERIFYHOST 81
#define PH_CURLOPT_HTTP_VERSION 84
#define PH_CURLOPT_NOSIGNAL 99
#define PH_CURLOPT_TCP_NODELAY 121
#define PH_CURLOPT_HTTP_CONTENT_DECODING 158
#define PH_CURLOPT_TCP_KEEPALIVE 213
#define PH_CURLOPT_PIPEWAIT 237
#define PH_CURLOPT_EXPECT_100_TIMEOUT_MS 227
#define PH_CURLOPT_HEADEROPT 229
#define PH_CURLHEADER_SEPARATE 1
/* CURLoption: string and pointer options */
#define PH_CURLOPT_WRITEDATA 10001
#define PH_CURLOPT_URL 10002
#define PH_CURLOPT_PROXY 10004
#define PH_CURLOPT_READDATA 10009
#define PH_CURLOPT_ERRORBUFFER 10010
#define PH_CURLOPT_POSTFIELDS 10015
#define PH_CURLOPT_HTTPHEADER 10023
#define PH_CURLOPT_PROXYHEADER 10228
#define PH_CURLOPT_SSLCERT 10025
#define PH_CURLOPT_SSLCERTTYPE 10086
#define PH_CURLOPT_SSLKEYTYPE 10088
#define PH_CURLOPT_KEYPASSWD 10026
#define PH_CURLOPT_HEADERDATA 10029
#define PH_CURLOPT_CUSTOMREQUEST 10036
#define PH_CURLOPT_XFERINFODATA 10057
#define PH_CURLOPT_CAINFO 10065
#define PH_CURLOPT_SSLKEY 10087
#define PH_CURLOPT_CAPATH 10097
#define PH_CURLOPT_ACCEPT_ENCODING 10102
#define PH_CURLOPT_PRIVATE 10103
#define PH_CURLOPT_SEEKDATA 10168
#define PH_CURLOPT_NOPROXY 10177
#define PH_CURLOPT_COPYPOSTFIELDS 10165
#define PH_CURLOPT_PINNEDPUBLICKEY 10230
#define PH_CURLOPT_PROTOCOLS_STR 10318
/* CURLoption: the TLS of an HTTPS proxy (libcurl 7.52; the blobs 7.71 and 7.77) */
#define PH_CURLOPT_PROXY_CAINFO 10246
#define PH_CURLOPT_PROXY_CAPATH 10247
#define PH_CURLOPT_PROXY_SSLVERSION 250
#define PH_CURLOPT_PROXY_SSLCERTTYPE 10255
#define PH_CURLOPT_PROXY_SSLKEYTYPE 10257
#define PH_CURLOPT_PROXY_KEYPASSWD 10258
#define PH_CURLOPT_PROXY_PINNEDPUBLICKEY 10263
#define PH_CURLOPT_PROXY_SSLCERT_BLOB 40293
#define PH_CURLOPT_PROXY_SSLKEY_BLOB 40294
#define PH_CURLOPT_PROXY_CAINFO_BLOB 40310
/* CURLoption: callbacks */
#define PH_CURLOPT_WRITEFUNCTION 20011
#define PH_CURLOPT_READFUNCTION 20012
#define PH_CURLOPT_HEADERFUNCTION 20079
#define PH_CURLOPT_SEEKFUNCTION 20167
#define PH_CURLOPT_XFERINFOFUNCTION 20219
/* CURLoption: curl_off_t options */
#define PH_CURLOPT_POSTFIELDSIZE_LARGE 30120
/* CURLoption: blobs */
#define PH_CURLOPT_SSLCERT_BLOB 40291
#define PH_CURLOPT_SSLKEY_BLOB 40292
#define PH_CURLOPT_CAINFO_BLOB 40309

/* CURLINFO */
#define PH_CURLINFO_RESPONSE_CODE 0x200002
#define PH_CURLINFO_HTTP_CONNECTCODE 0x200016
#define PH_CURLINFO_CAINFO 0x10003D   /* libcurl 7.84: the built-in CA bundle's path */
#define PH_CURLINFO_CAPATH 0x10003E   /* libcurl 7.84: the built-in CA directory */
#define PH_CURLINFO_HTTP_VERSION 0x20002E
#define PH_CURLINFO_SIZE_DOWNLOAD_T 0x600008
#define PH_CURLINFO_CONTENT_LENGTH_DOWNLOAD_T 0x60000F
#define PH_CURLINFO_CONTENT_LENGTH_UPLOAD_T 0x600010
/* A transfer's metrics (libcurl 7.61): microseconds from its start, counts, the peer. */
#define PH_CURLINFO_SIZE_UPLOAD_T 0x600007
#define PH_CURLINFO_TOTAL_TIME_T 0x600032
#define PH_CURLINFO_NAMELOOKUP_TIME_T 0x600033
#define PH_CURLINFO_CONNECT_TIME_T 0x600034
#define PH_CURLINFO_PRETRANSFER_TIME_T 0x600035
#define PH_CURLINFO_STARTTRANSFER_TIME_T 0x600036
#define PH_CURLINFO_APPCONNECT_TIME_T 0x600038
#define PH_CURLINFO_NUM_CONNECTS 0x20001A
#define PH_CURLINFO_REQUEST_SIZE 0x20000C
#define PH_CURLINFO_PRIMARY_IP 0x100020
#define PH_CURLINFO_PRIMARY_PORT 0x200028

/* CURLMoption */
#define PH_CURLMOPT_PIPELINING 3
#define PH_CURLMOPT_MAXCONNECTS 6
#define PH_CURLMOPT_MAX_HOST_CONNECTIONS 7
#define PH_CURLMOPT_MAX_TOTAL_CONNECTIONS 13

/* Values */
#define PH_CURL_HTTP_VERSION_1_0 1
#define PH_CURL_HTTP_VERSION_1_1 2
#define PH_CURL_HTTP_VERSION_2_0 3
#define PH_CURL_HTTP_VERSION_2TLS 4
#define PH_CURL_HTTP_VERSION_3 30
#define PH_CURL_SSLVERSION_TLSv1_2 6
#define PH_CURL_SSLVERSION_TLSv1_3 7
#define PH_CURLPIPE_MULTIPLEX 2
#define PH_CURL_READFUNC_ABORT 0x10000000
#define PH_CURL_SEEKFUNC_OK 0
#define PH_CURL_SEEKFUNC_FAIL 1
#define PH_CURL_ERROR_SIZE 256

/* Not libcurl's: mkstemp, the file opened with `flags` (O_CLOEXEC: closed on exec from the start,
 * where mkstemp and a later fcntl left a moment for a child to inherit it), for the transports'
 * spooled bodies. The C library declares mkostemp only for C code that asks for it (_GNU_SOURCE),
 * which Swift's Glibc module does not (ph_file.c). Returns the descriptor, or -1 with errno set;
 * `path_template` ends with XXXXXX, replaced by the name made. */
int ph_mkostemp(char *path_template, int flags);

#ifdef __cplusplus
}
#endif

#endif
